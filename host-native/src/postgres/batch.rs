//! A group commit for PostgreSQL: the commands of one group that arrive while a transaction
//! of that group is being written are decided together in the next one, in the order they
//! arrived, and committed with one `COMMIT` (one WAL flush) instead of one each
//! (docs/postgres.md, "Commands decided together").
//!
//! Each group has a [`Queue`]. A caller puts its command in it; the first caller that finds no
//! batch running leads: it takes the queued commands (its own among them, at most
//! [`MAX_BATCH`] at a time), has them decided and written in one transaction, hands every
//! caller its answer and wakes exactly those callers, and the oldest one still queued to lead
//! the next batch (a wake-up of every waiting thread per batch cost a tenth of the server's
//! CPU). Answers are handed out only after the transaction committed (or failed), so an
//! acknowledged receipt is durable, as before.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::thread::Thread;

use mwp_core::{Code, Command, Decision, Error, Result};

/// Most commands decided in one transaction. The group's lock is held while each of them is
/// checked (one signature verification each), so a batch is kept to a few milliseconds.
pub(super) const MAX_BATCH: usize = 64;

/// The commands of one group waiting for a transaction, and the answers not yet collected.
#[derive(Default)]
pub(super) struct Queue {
    waiting: Mutex<Waiting>,
}

#[derive(Default)]
struct Waiting {
    /// The ticket of the next command queued.
    next: u64,
    /// Commands not yet taken by a leader, oldest first.
    queued: Vec<Queued>,
    /// Answers of decided commands, by ticket, until their callers collect them.
    answers: HashMap<u64, Result<Decision>>,
    /// Whether a caller is deciding a batch now.
    leading: bool,
}

/// A command waiting for a leader, and the thread to wake once it is answered.
struct Queued {
    ticket: u64,
    cmd: Command,
    now_ms: u64,
    caller: Thread,
}

fn lock(m: &Mutex<Waiting>) -> MutexGuard<'_, Waiting> {
    // Every change to `Waiting` is complete before its guard is dropped: a panic elsewhere
    // leaves it consistent (and [`Leader`] answers what a panicking leader took).
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Queue {
    /// Decides `cmd` (at `now_ms`) together with the commands of the group queued beside it.
    /// `decide` is given a batch in arrival order and answers each of its commands, in order,
    /// once they are committed; it runs on the caller that leads, at most once per batch.
    pub(super) fn submit(
        &self,
        cmd: &Command,
        now_ms: u64,
        mut decide: impl FnMut(&[(Command, u64)]) -> Vec<Result<Decision>>,
    ) -> Result<Decision> {
        let mut w = lock(&self.waiting);
        let ticket = w.next;
        w.next += 1;
        w.queued.push(Queued {
            ticket,
            cmd: cmd.clone(),
            now_ms,
            caller: std::thread::current(),
        });
        loop {
            if let Some(answer) = w.answers.remove(&ticket) {
                return answer;
            }
            if w.leading {
                drop(w);
                // A wake-up that comes before this park is not lost (the thread's token);
                // one that finds nothing for this caller only makes it look again.
                std::thread::park();
                w = lock(&self.waiting);
                continue;
            }
            // Lead: take the oldest commands (this caller's is among them once every older
            // one is taken) and decide them without holding the queue.
            w.leading = true;
            let take = w.queued.len().min(MAX_BATCH);
            let mut callers = Vec::with_capacity(take);
            let mut batch = Vec::with_capacity(take);
            for q in w.queued.drain(..take) {
                callers.push((q.ticket, q.caller));
                batch.push((q.cmd, q.now_ms));
            }
            drop(w);
            let mut leader = Leader {
                queue: self,
                callers,
                own: ticket,
            };
            let mut answers = decide(&batch);
            // `decide` answers every command; a short answer is a bug, never a lost command.
            answers.resize_with(batch.len(), || Err(unanswered()));
            w = leader.finish(answers);
        }
    }
}

/// The caller deciding a batch. Dropped without [`Leader::finish`] (the decision panicked),
/// it answers the batch's commands with `STORAGE` and lets the next caller lead.
struct Leader<'a> {
    queue: &'a Queue,
    /// The batch's callers: ticket and thread.
    callers: Vec<(u64, Thread)>,
    /// The leader's own ticket.
    own: u64,
}

impl<'a> Leader<'a> {
    /// Hands out the batch's answers and stops leading, then wakes the batch's callers and
    /// the oldest caller still queued (to lead the next batch); returns the queue, locked
    /// again.
    fn finish(&mut self, answers: Vec<Result<Decision>>) -> MutexGuard<'a, Waiting> {
        let callers = std::mem::take(&mut self.callers);
        let mut w = lock(&self.queue.waiting);
        for ((ticket, _), answer) in callers.iter().zip(answers) {
            w.answers.insert(*ticket, answer);
        }
        w.leading = false;
        let next = w.queued.first().map(|q| q.caller.clone());
        drop(w);
        // Not the leader's own thread: it is awake, and a token left with it would make a
        // later park of that thread return at once.
        let me = std::thread::current().id();
        for (_, caller) in callers.iter().filter(|(_, t)| t.id() != me) {
            caller.unpark();
        }
        if let Some(next) = next {
            next.unpark();
        }
        lock(&self.queue.waiting)
    }
}

impl Drop for Leader<'_> {
    fn drop(&mut self) {
        if !self.callers.is_empty() {
            let answers = self.callers.iter().map(|_| Err(unanswered())).collect();
            let mut w = self.finish(answers);
            // The panicking leader's own answer would never be collected.
            w.answers.remove(&self.own);
        }
    }
}

fn unanswered() -> Error {
    Error::new(
        Code::Storage,
        "the command's batch did not finish deciding; retry it (commands are idempotent)",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Barrier};

    fn command(action: &str) -> Command {
        let id = |s: &str| mwp_core::Id::new(s).expect("an id");
        Command {
            org: id("o"),
            group: id("g"),
            actor: id("a"),
            action: id(action),
            session: 1,
            expect: None,
            body: mwp_core::Body::Tick(mwp_core::command::Tick {}),
            sig: mwp_core::crypto::Signature([0; 64]),
        }
    }

    /// Answers each command with a rejection naming its action and the batch's size.
    fn answer(batch: &[(Command, u64)]) -> Vec<Result<Decision>> {
        batch
            .iter()
            .map(|(c, now)| {
                Err(Error::new(
                    Code::Malformed,
                    format!("{} {} {}", c.action, now, batch.len()),
                ))
            })
            .collect()
    }

    /// Waits until `done` reaches `n`, failing after two minutes instead of hanging (a caller
    /// left waiting never finishes).
    fn wait_for(done: &AtomicUsize, n: usize) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        while done.load(Ordering::SeqCst) < n {
            assert!(
                std::time::Instant::now() < deadline,
                "{} of {n} callers finished",
                done.load(Ordering::SeqCst)
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// Callers that send one command each, all at once: each gets its own answer, fewer
    /// batches than callers are decided, and the callers queued behind a batch are woken to
    /// lead the next one (nobody else would send anything).
    #[test]
    fn every_caller_gets_its_own_answer_and_batches_form_under_contention() {
        let queue = Arc::new(Queue::default());
        let (batches, done) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let callers = 48;
        let barrier = Arc::new(Barrier::new(callers));
        for i in 0..callers {
            let (queue, batches, done, barrier) = (
                queue.clone(),
                batches.clone(),
                done.clone(),
                barrier.clone(),
            );
            std::thread::spawn(move || {
                barrier.wait();
                let got = queue.submit(&command(&format!("c{i}")), i as u64, |batch| {
                    batches.fetch_add(1, Ordering::SeqCst);
                    // Long enough for the others to queue behind the first batch.
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    answer(batch)
                });
                let message = got.expect_err("answered").message;
                let parts: Vec<&str> = message.split(' ').collect();
                assert_eq!(parts[..2], [format!("c{i}"), i.to_string()]);
                done.fetch_add(1, Ordering::SeqCst);
            });
        }
        wait_for(&done, callers);
        let n = batches.load(Ordering::SeqCst);
        assert!(n < callers, "{n} batches for {callers} callers");
        let w = lock(&queue.waiting);
        assert!(w.queued.is_empty() && w.answers.is_empty() && !w.leading);
    }

    /// Many callers submitting again and again, with batches of every size: every caller
    /// is woken for its answer or to lead (a lost wake-up would leave one waiting forever).
    #[test]
    fn no_caller_is_left_waiting() {
        let queue = Arc::new(Queue::default());
        let done = Arc::new(AtomicUsize::new(0));
        let (callers, rounds) = (32, 200);
        for c in 0..callers {
            let (queue, done) = (queue.clone(), done.clone());
            std::thread::spawn(move || {
                for r in 0..rounds {
                    let action = format!("c{c}-{r}");
                    let got = queue.submit(&command(&action), 0, |batch| {
                        if batch.len() % 3 == 0 {
                            std::thread::yield_now();
                        }
                        answer(batch)
                    });
                    assert!(got.expect_err("answered").message.starts_with(&action));
                }
                done.fetch_add(1, Ordering::SeqCst);
            });
        }
        wait_for(&done, callers);
        let w = lock(&queue.waiting);
        assert!(w.queued.is_empty() && w.answers.is_empty() && !w.leading);
    }

    #[test]
    fn a_batch_holds_at_most_max_batch_commands() {
        let queue = Queue::default();
        {
            let mut w = lock(&queue.waiting);
            for i in 0..(MAX_BATCH as u64 + 10) {
                w.queued.push(Queued {
                    ticket: i,
                    cmd: command(&format!("q{i}")),
                    now_ms: 0,
                    caller: std::thread::current(),
                });
            }
            w.next = MAX_BATCH as u64 + 10;
        }
        let mut sizes = Vec::new();
        let got = queue.submit(&command("last"), 7, |batch| {
            sizes.push(batch.len());
            answer(batch)
        });
        assert_eq!(got.expect_err("answered").message, "last 7 11");
        assert_eq!(sizes, [MAX_BATCH, 11]);
        assert_eq!(lock(&queue.waiting).answers.len(), MAX_BATCH + 10);
    }

    #[test]
    fn a_leader_that_panics_answers_its_batch_and_hands_on() {
        let queue = Arc::new(Queue::default());
        let q = queue.clone();
        let panicked = std::thread::spawn(move || {
            q.submit(&command("boom"), 0, |_| panic!("the decision failed"))
        })
        .join();
        assert!(panicked.is_err());
        let w = lock(&queue.waiting);
        assert!(!w.leading && w.answers.is_empty());
        drop(w);
        let got = queue.submit(&command("after"), 1, answer);
        assert_eq!(got.expect_err("answered").message, "after 1 1");
    }
}
