//! A small blocking connection pool: at most `size` connections, handed out one per call and
//! returned on drop. A connection the driver reports closed is discarded, not reused.
//!
//! Each connection is set up the same way on open: `search_path` to the configured schema,
//! and `synchronous_commit` raised to `on` when the server default is `off` (a receipt may be
//! handed out only after its commit is durable).

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

use postgres::{Client, NoTls};

use mwp_core::Result;

use super::sql::Statements;
use super::storage;

/// How long a caller waits for a free connection before `STORAGE`.
const WAIT: Duration = Duration::from_secs(30);

struct Slots {
    idle: Vec<(Client, Statements)>,
    open: usize,
}

/// The pool.
pub(crate) struct Pool {
    config: postgres::Config,
    schema: Option<String>,
    size: usize,
    slots: Mutex<Slots>,
    freed: Condvar,
}

/// A connection on loan; it goes back to the pool when dropped.
pub(crate) struct Conn<'p> {
    pool: &'p Pool,
    client: Option<(Client, Statements)>,
}

impl Pool {
    pub(crate) fn new(config: postgres::Config, schema: Option<String>, size: usize) -> Pool {
        Pool {
            config,
            schema,
            size: size.max(1),
            slots: Mutex::new(Slots {
                idle: Vec::new(),
                open: 0,
            }),
            freed: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Slots> {
        // The slots are consistent after every statement, so a panic elsewhere cannot have
        // left them half-changed: a poisoned lock is still usable.
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Opens a connection outside the pool, set up like the pooled ones.
    pub(crate) fn connect(&self) -> Result<Client> {
        let mut client = self
            .config
            .connect(NoTls)
            .map_err(|e| storage("connecting to PostgreSQL", &e))?;
        let mut setup = String::new();
        if let Some(schema) = &self.schema {
            setup.push_str(&format!("SET search_path TO \"{schema}\";"));
        }
        let sync = client
            .query_one("SHOW synchronous_commit", &[])
            .map_err(|e| storage("reading synchronous_commit", &e))?;
        let sync: String = sync
            .try_get(0)
            .map_err(|e| storage("reading synchronous_commit", &e))?;
        if sync == "off" {
            setup.push_str("SET synchronous_commit TO on;");
        }
        if !setup.is_empty() {
            client
                .batch_execute(&setup)
                .map_err(|e| storage("setting up the connection", &e))?;
        }
        Ok(client)
    }

    /// A connection: an idle one, a new one while fewer than `size` are open, or the next
    /// one returned (waiting at most 30 s).
    pub(crate) fn get(&self) -> Result<Conn<'_>> {
        let mut slots = self.lock();
        loop {
            while let Some(client) = slots.idle.pop() {
                if client.0.is_closed() {
                    slots.open -= 1;
                    continue;
                }
                return Ok(Conn {
                    pool: self,
                    client: Some(client),
                });
            }
            if slots.open < self.size {
                slots.open += 1;
                drop(slots);
                let opened = self.connect().and_then(|mut c| {
                    let sql = Statements::prepare(&mut c)?;
                    Ok((c, sql))
                });
                return match opened {
                    Ok(client) => Ok(Conn {
                        pool: self,
                        client: Some(client),
                    }),
                    Err(e) => {
                        self.lock().open -= 1;
                        self.freed.notify_one();
                        Err(e)
                    }
                };
            }
            let (next, timeout) = self
                .freed
                .wait_timeout(slots, WAIT)
                .unwrap_or_else(|p| p.into_inner());
            slots = next;
            if timeout.timed_out() && slots.idle.is_empty() && slots.open >= self.size {
                return Err(mwp_core::Error::new(
                    mwp_core::Code::Storage,
                    format!(
                        "all {} PostgreSQL connections stayed busy for {}s; raise pool_size or lower the load",
                        self.size,
                        WAIT.as_secs()
                    ),
                ));
            }
        }
    }

    /// Closes every idle connection (a restart drops them too).
    pub(crate) fn clear(&self) {
        let mut slots = self.lock();
        let idle = std::mem::take(&mut slots.idle);
        slots.open -= idle.len();
        drop(slots);
        self.freed.notify_all();
        close(idle);
    }
}

/// Drops connections on a thread of their own: each one owns a small runtime, and dropping
/// a runtime on an async runtime's thread panics (the last `Arc` of a store may well be
/// dropped there, e.g. when `mwp serve` shuts down).
fn close(clients: Vec<(Client, Statements)>) {
    if clients.is_empty() {
        return;
    }
    // If the thread cannot be spawned, dropping here is the only option left.
    if let Ok(handle) = std::thread::Builder::new()
        .name("mwp-pg-close".into())
        .spawn(move || drop(clients))
    {
        let _ = handle.join();
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        let idle = std::mem::take(&mut self.lock().idle);
        close(idle);
    }
}

impl Conn<'_> {
    /// The client and its prepared statements.
    pub(crate) fn parts(&mut self) -> (&mut Client, &Statements) {
        let (client, sql) = self
            .client
            .as_mut()
            .expect("the client is present until drop");
        (client, sql)
    }
}

impl Drop for Conn<'_> {
    fn drop(&mut self) {
        let mut slots = self.pool.lock();
        match self.client.take() {
            Some(c) if !c.0.is_closed() => slots.idle.push(c),
            _ => slots.open -= 1,
        }
        drop(slots);
        self.pool.freed.notify_one();
    }
}
