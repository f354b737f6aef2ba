//! A group commit for PostgreSQL: the commands of one group that arrive while a transaction
//! of that group is being written are decided together in the next one, in the order they
//! arrived, and committed with one `COMMIT` (one WAL flush) instead of one each
//! (docs/postgres.md, "Commands decided together").
//!
//! Each group has a [`Queue`]. A caller puts its command in it; the first caller that finds no
//! batch running leads: it takes the queued commands (its own among them, at most
//! [`MAX_BATCH`] at a time), has them decided and written in one transaction, hands every
//! caller its answer and wakes them. The others sleep until their answer is there, or until
//! the leader is done and one of them leads the next batch. Answers are handed out only after
//! the transaction committed (or failed), so an acknowledged receipt is durable, as before.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard};

use mwp_core::{Code, Command, Decision, Error, Result};

/// Most commands decided in one transaction. The group's lock is held while each of them is
/// checked (one signature verification each), so a batch is kept to a few milliseconds.
pub(super) const MAX_BATCH: usize = 64;

/// The commands of one group waiting for a transaction, and the answers not yet collected.
#[derive(Default)]
pub(super) struct Queue {
    waiting: Mutex<Waiting>,
    answered: Condvar,
}

#[derive(Default)]
struct Waiting {
    /// The ticket of the next command queued.
    next: u64,
    /// Commands not yet taken by a leader, oldest first: ticket, command, time of arrival.
    queued: Vec<(u64, Command, u64)>,
    /// Answers of decided commands, by ticket, until their callers collect them.
    answers: HashMap<u64, Result<Decision>>,
    /// Whether a caller is deciding a batch now.
    leading: bool,
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
        w.queued.push((ticket, cmd.clone(), now_ms));
        loop {
            if let Some(answer) = w.answers.remove(&ticket) {
                return answer;
            }
            if w.leading {
                w = self
                    .answered
                    .wait(w)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                continue;
            }
            // Lead: take the oldest commands (this caller's is among them once every older
            // one is taken) and decide them without holding the queue.
            w.leading = true;
            let take = w.queued.len().min(MAX_BATCH);
            let (tickets, batch): (Vec<u64>, Vec<(Command, u64)>) = w
                .queued
                .drain(..take)
                .map(|(t, c, now)| (t, (c, now)))
                .unzip();
            drop(w);
            let mut leader = Leader {
                queue: self,
                tickets,
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
    tickets: Vec<u64>,
}

impl<'a> Leader<'a> {
    /// Hands out the batch's answers, wakes the waiting callers and stops leading; returns
    /// the queue, still locked.
    fn finish(&mut self, answers: Vec<Result<Decision>>) -> MutexGuard<'a, Waiting> {
        let mut w = lock(&self.queue.waiting);
        for (ticket, answer) in std::mem::take(&mut self.tickets).into_iter().zip(answers) {
            w.answers.insert(ticket, answer);
        }
        w.leading = false;
        self.queue.answered.notify_all();
        w
    }
}

impl Drop for Leader<'_> {
    fn drop(&mut self) {
        if !self.tickets.is_empty() {
            let answers = self.tickets.iter().map(|_| Err(unanswered())).collect();
            drop(self.finish(answers));
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

    #[test]
    fn every_caller_gets_its_own_answer_and_batches_form_under_contention() {
        let queue = Arc::new(Queue::default());
        let batches = Arc::new(AtomicUsize::new(0));
        let callers = 48;
        let barrier = Arc::new(Barrier::new(callers));
        let handles: Vec<_> = (0..callers)
            .map(|i| {
                let (queue, batches, barrier) = (queue.clone(), batches.clone(), barrier.clone());
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
                })
            })
            .collect();
        for h in handles {
            h.join().expect("caller");
        }
        let n = batches.load(Ordering::SeqCst);
        assert!(n < callers, "{n} batches for {callers} callers");
        let w = lock(&queue.waiting);
        assert!(w.queued.is_empty() && w.answers.is_empty() && !w.leading);
    }

    #[test]
    fn a_batch_holds_at_most_max_batch_commands() {
        let queue = Queue::default();
        {
            let mut w = lock(&queue.waiting);
            for i in 0..(MAX_BATCH as u64 + 10) {
                w.queued.push((i, command(&format!("q{i}")), 0));
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
        assert!(!lock(&queue.waiting).leading);
        let got = queue.submit(&command("after"), 1, answer);
        assert_eq!(got.expect_err("answered").message, "after 1 1");
    }
}
