//! Threads parked until a count reaches the mark each waits for: the wake-up rule that a
//! group's commit (marks are seqs, the count its durable seq) and the store's sync rounds
//! (marks and count are round numbers) share. Whoever finishes a step wakes the threads it
//! served and, to hand the next step on, one more that still waits.

use std::thread::Thread;

/// Parked threads, each with the mark it waits for, in the order they parked.
#[derive(Default)]
pub(crate) struct Parked(Vec<(u64, Thread)>);

/// Threads to unpark, taken from [`Parked`] under its lock and unparked once the lock is
/// released: a thread woken while the waker still held the lock would block on it at once.
#[must_use = "the threads stay parked until `unpark` is called"]
#[derive(Default)]
pub(crate) struct Wakeups(Vec<Thread>);

impl Wakeups {
    /// Unparks every thread (call it after releasing the lock that guards the [`Parked`]).
    pub(crate) fn unpark(self) {
        for t in self.0 {
            t.unpark();
        }
    }

    /// Adds the threads of `other`.
    pub(crate) fn extend(&mut self, other: Wakeups) {
        self.0.extend(other.0);
    }
}

impl Parked {
    /// Records the calling thread as waiting for `mark`. It then releases the lock that
    /// guards this and calls `std::thread::park`: a wake-up that comes before the park is
    /// not lost (the thread's token). Once awake it either finds its mark reached (the
    /// waker forgot it) or [`Parked::forget_current`]s itself under the lock.
    pub(crate) fn push(&mut self, mark: u64) {
        self.0.push((mark, std::thread::current()));
    }

    /// Forgets the calling thread (it woke, for whatever reason).
    pub(crate) fn forget_current(&mut self) {
        let me = std::thread::current().id();
        self.0.retain(|(_, t)| t.id() != me);
    }

    /// Forgets the threads whose mark is at most `reached` (every thread when the step
    /// `failed`) and returns them to unpark; with `hand_off`, also returns the first thread
    /// still waiting (it stays recorded), so that it leads the next step.
    pub(crate) fn wake(&mut self, reached: u64, failed: bool, hand_off: bool) -> Wakeups {
        let mut woken = Vec::new();
        let mut leader = !hand_off;
        self.0.retain(|(mark, t)| {
            if failed || *mark <= reached {
                woken.push(t.clone());
                false
            } else {
                if !leader {
                    leader = true;
                    woken.push(t.clone());
                }
                true
            }
        });
        Wakeups(woken)
    }

    /// Forgets every thread and returns them to unpark: nothing they wait for will come.
    pub(crate) fn wake_all(&mut self) -> Wakeups {
        Wakeups(self.0.drain(..).map(|(_, t)| t).collect())
    }

    /// Returns the first thread still waiting, if any (it stays recorded), to unpark so
    /// that it leads the next step.
    pub(crate) fn wake_first(&self) -> Wakeups {
        Wakeups(self.0.first().map(|(_, t)| t.clone()).into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// Threads waiting for marks 1..=4 of a count advanced one step at a time all return,
    /// each once its mark is reached.
    #[test]
    fn every_parked_thread_returns_once_its_mark_is_reached() {
        let state = Arc::new(Mutex::new((0u64, Parked::default())));
        let threads: Vec<_> = (1..=4u64)
            .map(|mark| {
                let state = Arc::clone(&state);
                std::thread::spawn(move || loop {
                    let mut s = state.lock().expect("no test thread panics holding it");
                    if s.0 >= mark {
                        return s.0;
                    }
                    s.1.push(mark);
                    drop(s);
                    std::thread::park();
                    state
                        .lock()
                        .expect("no test thread panics holding it")
                        .1
                        .forget_current();
                })
            })
            .collect();
        for step in 1..=4 {
            std::thread::sleep(std::time::Duration::from_millis(5));
            let mut s = state.lock().expect("no test thread panics holding it");
            s.0 = step;
            let woken = s.1.wake(step, false, true);
            drop(s);
            woken.unpark();
        }
        for (t, mark) in threads.into_iter().zip(1..) {
            assert!(t.join().expect("the waiter does not panic") >= mark);
        }
        assert!(
            state
                .lock()
                .expect("no test thread panics holding it")
                .1
                 .0
                .is_empty(),
            "nobody is left parked"
        );
    }
}
