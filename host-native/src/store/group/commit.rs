//! The accept transition and the group commit: commands are decided under the group lock and
//! staged; a leader writes every staged event as one batch and has it synced (in a round the
//! store's other groups share) before any answer leaves (transaction boundaries 1 and 2 of
//! the module doc); segments roll here.

use super::*;
use crate::store::parked::Wakeups;

/// A command decided by [`GroupLog::decide`], not answered yet.
pub(crate) struct Decided {
    /// The decision, answered once `wait_for` is durable.
    pub(crate) decision: Result<Decision>,
    /// The seq whose durability the answer waits for (the state the decision was made on).
    pub(crate) wait_for: u64,
    snapshot: Option<authority::SnapshotDue>,
    seal: Option<mwp_core::audit::OrgPolicy>,
}

impl Decided {
    /// Whether [`GroupLog::complete`] does more than answer: erase, snapshot or seal, which
    /// write files.
    pub(crate) fn writes_more(&self) -> bool {
        self.snapshot.is_some()
            || self.seal.is_some()
            || matches!(&self.decision, Ok(Decision::Accepted(e)) if matches!(e.kind, EventKind::EventRedacted(_)))
    }
}

/// The answer of [`GroupLog::durable_async`]: ready once `seq` is durable.
pub(crate) struct Durable {
    group: Arc<GroupLog>,
    seq: u64,
    /// Its place among the group's waiting tasks, once it waited.
    key: Option<u64>,
}

impl std::future::Future for Durable {
    type Output = Result<()>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<()>> {
        use std::task::Poll;
        let this = &mut *self;
        let g = &this.group;
        if g.durable() >= this.seq {
            return Poll::Ready(Ok(()));
        }
        // A flush records the durable seq or the sticky error, and a flusher clears
        // `flushing`, under `sync` before it wakes the waiting tasks: looked at under it, with
        // the task recorded before it is released, no flush ends unseen.
        let ready = |g: &GroupLog| match g.ctx.check_sticky() {
            Err(e) => Some(Err(e)),
            Ok(()) => (g.durable() >= this.seq).then_some(Ok(())),
        };
        let mut s = lock(&g.sync);
        if let Some(done) = ready(g) {
            return Poll::Ready(done);
        }
        if !s.flushing {
            s.flushing = true;
            drop(s);
            g.start_committer();
            s = lock(&g.sync);
            if let Some(done) = ready(g) {
                return Poll::Ready(done);
            }
            if !s.flushing {
                // The committer ended without `seq` (it cannot: `seq` was staged before it
                // started): poll again rather than wait for a flush nobody leads.
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
        }
        s.tasks.wait(&mut this.key, this.seq, cx.waker());
        Poll::Pending
    }
}

impl Drop for Durable {
    /// Forgets the waiting task. One dropped while still waiting and no flush runs may have
    /// been woken to start the next flush ([`Tasks::wake_first`]) and never run: it hands
    /// that on to the next task still waiting, which would otherwise wait for a flush nobody
    /// starts.
    ///
    /// [`Tasks::wake_first`]: crate::store::parked::Tasks::wake_first
    fn drop(&mut self) {
        if let Some(key) = self.key {
            let mut s = lock(&self.group.sync);
            let woken = if s.tasks.forget(key) && !s.flushing {
                s.tasks.wake_first()
            } else {
                Wakeups::default()
            };
            drop(s);
            woken.unpark();
        }
    }
}

/// A batch of staged events written to the end of its segment, not yet durable.
struct Batch {
    /// Bytes of its records.
    records: u64,
    /// Bytes written: the records and the zeros reserved after them.
    written: u64,
    /// Offset of each record.
    offsets: Vec<u64>,
    last_seq: u64,
    last_id: Hash,
}

/// The groups waiting for the store's committer ([`GroupLog::commit_in_background`]), one of
/// each store: a group is queued at most once, while its `flushing` is set for the committer.
#[derive(Default)]
pub(crate) struct CommitQueue {
    groups: Vec<Arc<GroupLog>>,
    /// Whether a committer runs (it takes every group queued before it stops).
    running: bool,
}

/// The store's committer: takes every queued group, commits them in one round
/// ([`GroupLog::commit_round`]), and again until the queue is empty.
fn commit_queued(ctx: &Ctx) {
    loop {
        let groups = {
            let mut q = lock(&ctx.commit_queue);
            if q.groups.is_empty() {
                q.running = false;
                return;
            }
            std::mem::take(&mut q.groups)
        };
        let again = GroupLog::commit_round(ctx, &groups);
        if !again.is_empty() {
            lock(&ctx.commit_queue).groups.extend(again);
        }
    }
}

impl GroupLog {
    /// Decides a command; an accepted event is durable when this returns.
    pub(crate) fn submit(self: &Arc<Self>, cmd: &Command, now_ms: u64) -> Result<Decision> {
        let decided = self.decide(cmd, now_ms)?;
        self.wait_durable(decided.wait_for)?;
        self.complete(decided, now_ms)
    }

    /// Decides a command and stages an accepted event: steps 1 and 2 of accept (transaction
    /// boundary 1). Nothing is answered before the state it was decided on is durable
    /// ([`Decided::wait_for`]) and [`GroupLog::complete`] has run.
    pub(crate) fn decide(&self, cmd: &Command, now_ms: u64) -> Result<Decided> {
        self.ctx.check_sticky()?;
        // Step 2 of accept, the signature check, runs here outside the lock so that
        // concurrent submitters verify in parallel; accept re-checks if the key changed.
        // A member's key is decoded once, in the state, and read from `signers` without
        // taking `core`; the authority's only signs ticks.
        let prepared = if cmd.actor.is_authority() {
            self.with_state(|s| s.authority_key.prepare())
        } else {
            let cached = read(&self.signers).get(&cmd.actor).cloned();
            cached
                .or_else(|| self.with_state(|s| s.members.get(&cmd.actor)?.prepared_key().cloned()))
        };
        // The core keeps the content bytes it verified, so that deciding does not encode them
        // again.
        let verified = prepared
            .as_ref()
            .and_then(|p| cmd.verify_once(p).ok().flatten());
        let (decision, wait_for, snapshot, seal) = {
            let mut core = lock(&self.core);
            self.ctx.check_sticky()?;
            if !cmd.actor.is_authority() {
                self.refresh_signer(core.state(), &cmd.actor, prepared.as_ref());
            }
            let decided = match &verified {
                Some(v) => core.driver.handle_verified(v, now_ms),
                None => core.driver.handle_command(cmd, now_ms),
            };
            match decided {
                Err(e) => (Err(e), core.state().seq, None, None),
                Ok(Step::Rejected(r)) => (Ok(Decision::Rejected(r)), core.state().seq, None, None),
                Ok(Step::Duplicate(r)) => {
                    let seq = r.seq;
                    (Ok(Decision::Duplicate(r)), seq, None, None)
                }
                Ok(Step::Accepted(commit)) => {
                    // The driver applied the event; it must reach the log or the store
                    // refuses writes (a failed flush is sticky), so the state never
                    // outlives what is durable.
                    if commit.bytes.len() > MAX_RECORD_LEN as usize {
                        let e = Error::new(
                            Code::Storage,
                            format!(
                                "event is {} bytes; the store's record limit is {MAX_RECORD_LEN}",
                                commit.bytes.len()
                            ),
                        );
                        self.ctx.set_sticky(e.clone());
                        return Err(e);
                    }
                    let Commit {
                        event,
                        bytes,
                        snapshot,
                        seal,
                        ..
                    } = commit;
                    core.pending.push(Staged {
                        seq: event.seq,
                        id: event.id,
                        bytes,
                    });
                    let seq = event.seq;
                    (Ok(Decision::Accepted(event)), seq, snapshot, seal)
                }
            }
        };
        Ok(Decided {
            decision,
            wait_for,
            snapshot,
            seal,
        })
    }

    /// Records the state's key of member `actor` in `signers` when it is not `used` (the key
    /// the signature was checked under): the member is new to the cache or changed its key.
    /// A key the state no longer holds is forgotten.
    fn refresh_signer(&self, state: &GroupState, actor: &Id, used: Option<&PreparedKey>) {
        let used = used.map(PreparedKey::public);
        match state.members.get(actor) {
            Some(m) if used == Some(m.key) => {}
            Some(m) => {
                if let Some(p) = m.prepared_key() {
                    write(&self.signers).insert(actor.clone(), p.clone());
                }
            }
            None if used.is_some() => {
                write(&self.signers).remove(actor);
            }
            None => {}
        }
    }

    /// What follows an accepted event once it is durable: erasing a redacted payload, a
    /// snapshot that is due, the seal of an archived group; then the decision is answered.
    pub(crate) fn complete(self: &Arc<Self>, decided: Decided, now_ms: u64) -> Result<Decision> {
        let Decided {
            decision,
            snapshot,
            seal,
            ..
        } = decided;
        if let Ok(Decision::Accepted(event)) = &decision {
            if let EventKind::EventRedacted(r) = &event.kind {
                self.fail_sticky(self.erase(r.seq))?;
            }
            if let Some(due) = snapshot {
                let archived = matches!(event.kind, EventKind::GroupArchived(_));
                if self.ctx.background_snapshots && !archived {
                    let me = Arc::clone(self);
                    std::thread::spawn(move || {
                        // A failure is recorded as the sticky storage error.
                        let _ = me.fail_sticky(me.write_snapshot(due.state()));
                    });
                } else {
                    self.fail_sticky(self.write_snapshot(due.state()))?;
                }
            }
            // Archived under an Organization policy: seal once the final snapshot is
            // durable, before the receipt is returned (SPEC §6a).
            if let Some(policy) = &seal {
                self.fail_sticky(self.seal(policy, now_ms))?;
            }
        }
        decision
    }

    /// Makes a storage failure sticky.
    pub(super) fn fail_sticky<T>(&self, r: Result<T>) -> Result<T> {
        if let Err(e) = &r {
            if e.code == Code::Storage {
                self.ctx.set_sticky(e.clone());
            }
        }
        r
    }

    /// Waits until every event up to `seq` is durable, flushing as the leader if nobody is.
    ///
    /// A submitter that finds a flush running parks. The leader, when its sync is done,
    /// unparks the submitters whose events it made durable (all of them if it failed) and
    /// one more, still waiting, to lead the next flush of what was staged meanwhile. A
    /// submitter woken with its event durable returns without taking the lock again.
    pub(crate) fn wait_durable(&self, seq: u64) -> Result<()> {
        let mut s = lock(&self.sync);
        loop {
            if self.durable() >= seq {
                return Ok(());
            }
            if let Err(e) = self.ctx.check_sticky() {
                // Nothing will be flushed any more: nobody may stay parked.
                let mut woken = s.waiters.wake_all();
                woken.extend(s.tasks.wake_all());
                drop(s);
                woken.unpark();
                return Err(e);
            }
            if !s.flushing {
                s.flushing = true;
                drop(s);
                let flushed = self.flush();
                s = lock(&self.sync);
                s.flushing = false;
                let (_, woken) = self.flushed(&mut s, flushed, true);
                drop(s);
                woken.unpark();
                s = lock(&self.sync);
                continue;
            }
            s.waiters.push(seq);
            drop(s);
            // A wake-up that came before this park is not lost (the thread's token).
            std::thread::park();
            // The flush that made `seq` durable forgot this thread when it woke it.
            if self.durable() >= seq {
                return Ok(());
            }
            s = lock(&self.sync);
            s.waiters.forget_current();
        }
    }

    /// Records the end of a flush (`flushing` already cleared by a leader that hands the next
    /// flush on): the durable seq, or the sticky error. Returns whether the flush failed, and
    /// the submitters to wake once `s` is released: those whose events it made durable (all
    /// of them if it failed), parked or waiting in [`GroupLog::durable_async`], and, with
    /// `hand_off`, one more of each, still waiting, to lead the next flush.
    fn flushed(&self, s: &mut SyncState, flushed: Result<u64>, hand_off: bool) -> (bool, Wakeups) {
        let failed = match flushed {
            Ok(d) => {
                // Only written under `sync` (held here): no update is lost.
                self.durable.fetch_max(d, Ordering::Release);
                false
            }
            Err(e) => {
                self.ctx.set_sticky(e);
                true
            }
        };
        let mut woken = s.waiters.wake(self.durable(), failed, hand_off);
        woken.extend(s.tasks.wake(self.durable(), failed));
        if hand_off {
            woken.extend(s.tasks.wake_first());
        }
        (failed, woken)
    }

    /// Makes sure a flush will cover `seq` without waiting for it: when no flush runs, queues
    /// the group for the store's committer ([`CommitQueue`]), which writes the staged batches
    /// of every queued group and makes them durable in one sync round, round after round
    /// until none is left. Without a file-system sync (every file is synced on its own) the
    /// group gets a committer of its own instead, so that the groups' syncs run side by side.
    /// Committers run on the blocking pool (a thread when there is no runtime). A submitter
    /// that needs its answer then waits in [`GroupLog::durable_async`], holding no thread.
    pub(crate) fn commit_in_background(self: &Arc<Self>, seq: u64) {
        {
            let mut s = lock(&self.sync);
            if s.flushing || self.durable() >= seq {
                return;
            }
            s.flushing = true;
        }
        self.start_committer();
    }

    /// Starts the committer that [`GroupLog::commit_in_background`] describes, for a group
    /// whose `flushing` the caller has just set.
    fn start_committer(self: &Arc<Self>) {
        let committer: Box<dyn FnOnce() + Send> = if self.ctx.shared_sync.rounds() {
            let start = {
                let mut q = lock(&self.ctx.commit_queue);
                q.groups.push(Arc::clone(self));
                !std::mem::replace(&mut q.running, true)
            };
            if !start {
                return;
            }
            let ctx = Arc::clone(&self.ctx);
            Box::new(move || commit_queued(&ctx))
        } else {
            let me = Arc::clone(self);
            Box::new(move || me.commit_staged())
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => drop(rt.spawn_blocking(committer)),
            Err(_) => drop(std::thread::spawn(committer)),
        }
    }

    /// The committer of a group of its own ([`GroupLog::commit_in_background`]): it leads
    /// flushes (`flushing` is set) until nothing is staged or storage failed.
    fn commit_staged(&self) {
        loop {
            let flushed = match self.ctx.check_sticky() {
                Ok(()) => self.flush(),
                Err(e) => Err(e),
            };
            let mut s = lock(&self.sync);
            let (failed, mut woken) = self.flushed(&mut s, flushed, false);
            // Staging happens before `commit_in_background` looks at `flushing`, so what is
            // staged after this check finds `flushing` cleared and starts a committer.
            let done = failed || lock(&self.core).pending.is_empty();
            if done {
                s.flushing = false;
                // A submitter parked meanwhile may still wait for a later seq: it leads.
                woken.extend(s.waiters.wake_first());
                woken.extend(s.tasks.wake_first());
            }
            drop(s);
            woken.unpark();
            if done {
                return;
            }
        }
    }

    /// One round of the store's committer: writes the staged batch of each of `groups` (each
    /// has `flushing` set for it), makes them all durable in one sync round and records each
    /// group's flush. Returns the groups that staged more meanwhile (they stay `flushing`).
    fn commit_round(ctx: &Ctx, groups: &[Arc<GroupLog>]) -> Vec<Arc<GroupLog>> {
        // Each writer stays locked from its write to the end of the sync, as in `flush`.
        // Only the store's one committer holds more than one group's writer at a time.
        let mut writers = Vec::with_capacity(groups.len());
        let mut written = Vec::with_capacity(groups.len());
        let mut files = Vec::new();
        // A writer that lost the directory to another appends nothing: one look at the owner
        // record per round, whatever the number of groups and commands in it.
        let owned = ctx.check_owner();
        for g in groups {
            let mut w = lock(&g.io);
            let batch = match &owned {
                Ok(()) => g.ctx.check_sticky().and_then(|()| g.write_staged(&mut w)),
                Err(e) => Err(e.clone()),
            };
            if let Ok(Some(_)) = &batch {
                files.push((w.file.clone(), g.path(&w.name)));
            }
            writers.push(w);
            written.push(batch);
        }
        let synced = if files.is_empty() {
            Ok(())
        } else {
            ctx.shared_sync.sync_all(files)
        };
        let mut again = Vec::new();
        for ((g, mut w), batch) in groups.iter().zip(writers).zip(written) {
            let flushed = match (batch, &synced) {
                (Err(e), _) => Err(e),
                (Ok(Some(_)), Err(e)) => Err(e.clone()),
                (Ok(None), _) => Ok(w.last_seq),
                (Ok(Some(batch)), Ok(())) => Ok(g.batch_durable(&mut w, batch)),
            };
            drop(w);
            let mut s = lock(&g.sync);
            let (failed, mut woken) = g.flushed(&mut s, flushed, false);
            // As in `commit_staged`: what is staged after this check starts a new commit.
            if failed || lock(&g.core).pending.is_empty() {
                s.flushing = false;
                woken.extend(s.waiters.wake_first());
                woken.extend(s.tasks.wake_first());
            } else {
                again.push(Arc::clone(g));
            }
            drop(s);
            woken.unpark();
        }
        again
    }

    /// Waits, without holding a thread, until every event up to `seq` is durable, starting
    /// a committer whenever none runs ([`GroupLog::commit_in_background`]). The task is
    /// woken by the flush that makes `seq` durable, not by every flush, or to start the next
    /// flush when the one that ended leaves no committer. Fails with the sticky storage
    /// error once storage failed.
    pub(crate) fn durable_async(self: &Arc<Self>, seq: u64) -> Durable {
        Durable {
            group: Arc::clone(self),
            seq,
            key: None,
        }
    }

    /// Writes every staged event as one batch and has the store's sync rounds make it
    /// durable. Returns the last durable seq.
    pub(super) fn flush(&self) -> Result<u64> {
        let mut w = lock(&self.io);
        if lock(&self.core).pending.is_empty() {
            return Ok(w.last_seq);
        }
        // A writer that lost the directory to another appends nothing (one look per batch).
        self.ctx.check_owner()?;
        let Some(batch) = self.write_staged(&mut w)? else {
            return Ok(w.last_seq);
        };
        // Shared with the other groups' commits: one sync may cover many groups' batches.
        self.ctx.shared_sync.sync(&w.file, self.path(&w.name))?;
        Ok(self.batch_durable(&mut w, batch))
    }

    /// Writes every staged event as one batch at the end of the segment (rolling it first
    /// when full), not synced; `None` when nothing is staged. [`GroupLog::batch_durable`]
    /// records it once synced.
    fn write_staged(&self, w: &mut Writer) -> Result<Option<Batch>> {
        let pending = std::mem::take(&mut lock(&self.core).pending);
        let (Some(first), Some(last)) = (pending.first(), pending.last()) else {
            return Ok(None);
        };
        let (first_seq, last_seq, last_id) = (first.seq, last.seq, last.id);
        if w.end >= self.ctx.segment_bytes && w.end > FILE_HEADER_LEN as u64 {
            self.roll(w, first_seq)?;
        }
        let size: usize = pending
            .iter()
            .map(|p| RECORD_HEADER_LEN + p.bytes.len())
            .sum();
        let mut buf = Vec::with_capacity(size);
        let mut offsets = Vec::with_capacity(pending.len());
        for p in &pending {
            offsets.push(w.end + buf.len() as u64);
            encode_record(&mut buf, p.seq, first_seq, &p.bytes);
        }
        let records = buf.len() as u64;
        if w.end + records > w.alloc && self.ctx.reserve_bytes > 0 {
            // Past the reserved space: reserve more in the same write and the same sync.
            // A crash leaves zeros after the last record, which the open takes as the end.
            // The reservation doubles the segment up to `reserve_bytes`, so that a store
            // of many small groups does not write megabytes of zeros for each.
            let zeros = mwp_core::log_format::reserve_len(w.alloc, self.ctx.reserve_bytes);
            let zeros = usize::try_from(zeros).unwrap_or(usize::MAX);
            buf.resize(buf.len().saturating_add(zeros), 0);
        }
        w.file.write_at(w.end, &buf).map_err(io_err(format!(
            "append to {}",
            self.path(&w.name).display()
        )))?;
        Ok(Some(Batch {
            records,
            written: buf.len() as u64,
            offsets,
            last_seq,
            last_id,
        }))
    }

    /// Records a batch of [`GroupLog::write_staged`] as durable (its segment was synced
    /// since); returns its last seq.
    fn batch_durable(&self, w: &mut Writer, batch: Batch) -> u64 {
        w.alloc = w.alloc.max(w.end + batch.written);
        w.end += batch.records;
        w.last_seq = batch.last_seq;
        w.last_id = batch.last_id;
        let mut index = write(&self.index);
        if let Some(seg) = index.last_mut() {
            seg.offsets.extend(batch.offsets);
            seg.end = w.end;
        }
        batch.last_seq
    }

    /// Starts a new segment whose first record will be `first_seq`.
    ///
    /// The segment being closed is first cut to its last record and synced: only the last
    /// segment may end in reserved zeros.
    pub(super) fn roll(&self, w: &mut Writer, first_seq: u64) -> Result<()> {
        if w.alloc > w.end {
            let path = self.path(&w.name);
            w.file
                .set_len(w.end)
                .map_err(io_err(format!("cut {} to its last record", path.display())))?;
            w.file
                .sync_data()
                .map_err(io_err(format!("sync {}", path.display())))?;
            w.alloc = w.end;
        }
        let name = segment_name(first_seq);
        let header = FileHeader {
            magic: SEGMENT_MAGIC,
            first_seq,
            prev: w.last_id,
            group: self.id.clone(),
        }
        .encode();
        let file = write_new_file(&self.ctx, &self.dir, &name, &header)?;
        w.file = file.clone();
        w.name = name.clone();
        w.end = FILE_HEADER_LEN as u64;
        w.alloc = w.end;
        write(&self.index).push(SegmentIndex {
            first_seq,
            name,
            file,
            offsets: Vec::new(),
            end: FILE_HEADER_LEN as u64,
        });
        Ok(())
    }

    /// Submits the `tick` the driver sends at `now_ms` ([`Authority::poll_tick`]); `None`
    /// when nothing is due.
    pub(crate) fn tick(self: &Arc<Self>, now_ms: u64) -> Result<Option<(Command, Decision)>> {
        let Some(cmd) = lock(&self.core).driver.poll_tick(now_ms)? else {
            return Ok(None);
        };
        let decision = self.submit(&cmd, now_ms)?;
        Ok(Some((cmd, decision)))
    }
}
