//! Threads parked, and tasks waiting, until a count reaches the mark each waits for: the
//! wake-up rule that a group's commit (marks are seqs, the count its durable seq) and the
//! store's sync rounds (marks and count are round numbers) share. Whoever finishes a step
//! wakes the threads and tasks it served and, to hand the next step on, one more that still
//! waits.

use std::task::Waker;
use std::thread::Thread;

/// Parked threads, each with the mark it waits for, in the order they parked.
#[derive(Default)]
pub(crate) struct Parked(Vec<(u64, Thread)>);

/// Threads to unpark and tasks to wake, taken from [`Parked`] and [`Tasks`] under their lock
/// and woken once the lock is released: a thread woken while the waker still held the lock
/// would block on it at once.
#[must_use = "the threads stay parked and the tasks asleep until `unpark` is called"]
#[derive(Default)]
pub(crate) struct Wakeups {
    threads: Vec<Thread>,
    tasks: Vec<Waker>,
}

impl Wakeups {
    /// Unparks every thread and wakes every task (call it after releasing the lock that
    /// guards the [`Parked`] and [`Tasks`]).
    pub(crate) fn unpark(self) {
        for t in self.threads {
            t.unpark();
        }
        for w in self.tasks {
            w.wake();
        }
    }

    /// Adds the threads and tasks of `other`.
    pub(crate) fn extend(&mut self, other: Wakeups) {
        self.threads.extend(other.threads);
        self.tasks.extend(other.tasks);
    }
}

/// Tasks waiting, without a thread, for a mark, each under the key its future keeps: woken by
/// the step that reaches its mark (all of them if it failed), not by every step, so that a
/// task waiting for the next step is not polled for nothing after each one.
#[derive(Default)]
pub(crate) struct Tasks {
    /// (key, mark, waker), in the order they began to wait.
    waiting: Vec<(u64, u64, Waker)>,
    next_key: u64,
}

impl Tasks {
    /// Records that the task of `waker` waits for `mark`. `key` is the waiter's: `None` the
    /// first time (it is then set); a waiter still recorded under it has its waker replaced
    /// (a task polled again may run elsewhere).
    pub(crate) fn wait(&mut self, key: &mut Option<u64>, mark: u64, waker: &Waker) {
        if let Some(k) = *key {
            if let Some((_, m, w)) = self.waiting.iter_mut().find(|(at, _, _)| *at == k) {
                *m = mark;
                if !w.will_wake(waker) {
                    w.clone_from(waker);
                }
                return;
            }
        }
        let k = self.next_key;
        self.next_key = self.next_key.wrapping_add(1);
        *key = Some(k);
        self.waiting.push((k, mark, waker.clone()));
    }

    /// Forgets the waiter `key` (its future ended or was dropped); nothing if it was woken.
    /// Returns whether it was still waiting.
    pub(crate) fn forget(&mut self, key: u64) -> bool {
        let before = self.waiting.len();
        self.waiting.retain(|(k, _, _)| *k != key);
        self.waiting.len() < before
    }

    /// Forgets the tasks whose mark is at most `reached` (every task when the step `failed`)
    /// and returns them to wake.
    pub(crate) fn wake(&mut self, reached: u64, failed: bool) -> Wakeups {
        let mut tasks = Vec::new();
        self.waiting.retain(|(_, mark, w)| {
            let done = failed || *mark <= reached;
            if done {
                tasks.push(w.clone());
            }
            !done
        });
        Wakeups {
            threads: Vec::new(),
            tasks,
        }
    }

    /// Returns the first task still waiting, if any (it stays recorded), to wake so that it
    /// starts the next step.
    pub(crate) fn wake_first(&self) -> Wakeups {
        Wakeups {
            threads: Vec::new(),
            tasks: self
                .waiting
                .first()
                .map(|(_, _, w)| w.clone())
                .into_iter()
                .collect(),
        }
    }

    /// Forgets every task and returns them to wake: nothing they wait for will come.
    pub(crate) fn wake_all(&mut self) -> Wakeups {
        Wakeups {
            threads: Vec::new(),
            tasks: self.waiting.drain(..).map(|(_, _, w)| w).collect(),
        }
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
        Wakeups {
            threads: woken,
            tasks: Vec::new(),
        }
    }

    /// Forgets every thread and returns them to unpark: nothing they wait for will come.
    pub(crate) fn wake_all(&mut self) -> Wakeups {
        Wakeups {
            threads: self.0.drain(..).map(|(_, t)| t).collect(),
            tasks: Vec::new(),
        }
    }

    /// Returns the first thread still waiting, if any (it stays recorded), to unpark so
    /// that it leads the next step.
    pub(crate) fn wake_first(&self) -> Wakeups {
        Wakeups {
            threads: self.0.first().map(|(_, t)| t.clone()).into_iter().collect(),
            tasks: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    /// A waker that counts its wakes.
    struct Count(AtomicUsize);

    impl std::task::Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A step wakes only the tasks it served: one waiting for a later mark is not woken for
    /// nothing, a task polled again is recorded once, and one that stopped waiting is not
    /// woken at all.
    #[test]
    fn a_step_wakes_only_the_tasks_whose_mark_it_reached() {
        let counts: Vec<Arc<Count>> = (0..4)
            .map(|_| Arc::new(Count(AtomicUsize::new(0))))
            .collect();
        let wakers: Vec<Waker> = counts.iter().map(|c| Waker::from(Arc::clone(c))).collect();
        let woken = |i: usize| counts[i].0.load(Ordering::SeqCst);
        let mut tasks = Tasks::default();
        let mut keys = [None; 4];
        for (i, mark) in [1u64, 2, 2, 3].into_iter().enumerate() {
            tasks.wait(&mut keys[i], mark, &wakers[i]);
        }
        // Polled again before any step: still one entry.
        tasks.wait(&mut keys[1], 2, &wakers[1]);
        let gone = keys[3].expect("a key");
        assert!(tasks.forget(gone));
        tasks.wake(1, false).unpark();
        assert_eq!((woken(0), woken(1), woken(2), woken(3)), (1, 0, 0, 0));
        tasks.wake(1, false).unpark();
        assert_eq!(woken(0), 1, "a task is woken once");
        tasks.wake_first().unpark();
        assert_eq!(
            (woken(1), woken(2)),
            (1, 0),
            "the first still waiting starts the next step"
        );
        tasks.wake(2, false).unpark();
        assert_eq!((woken(1), woken(2), woken(3)), (2, 1, 0));
        tasks.wake(9, true).unpark();
        assert_eq!(woken(3), 0, "a task that stopped waiting is not woken");
        tasks.wait(&mut keys[0], 5, &wakers[0]);
        tasks.wake(4, true).unpark();
        assert_eq!(woken(0), 2, "a failed step wakes every task");
    }

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
