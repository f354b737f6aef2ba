//! [`PostgresRouter`]: groups spread over several PostgreSQL servers by group ID.
//!
//! Each group lives on exactly one server, chosen by rendezvous (highest random weight)
//! hashing: the server whose `sha256("mwp rendezvous\0" + name + "\0" + group)` is largest.
//! Every process given the same list of server names routes every group the same way, with
//! no coordination; adding a server moves only the groups that now score highest on it.
//! Names are `shard=NAME` when given, else `host:port/dbname`, so changing a password or a
//! pool size does not move anything.

use mwp_core::transcript::Host;
use mwp_core::{
    canonical, Code, Command, Decision, Error, Event, GroupState, Id, PublicKey, Receipt, Result,
    SecretKey, WorkState,
};

use super::config::{split_store_list, KeySource, PostgresConfig};
use super::PostgresAuthority;
use crate::service::AuthorityService;

/// An authority over groups spread across PostgreSQL servers; all share one authority key.
#[derive(Debug)]
pub struct PostgresRouter {
    shards: Vec<PostgresAuthority>,
}

/// The index of the server, among those named `names`, that holds `group`.
pub fn rendezvous(names: &[&str], group: &str) -> usize {
    let score = |name: &str| {
        let digest = canonical::sha256(format!("mwp rendezvous\0{name}\0{group}").as_bytes());
        let mut first = [0u8; 8];
        first.copy_from_slice(&digest[..8]);
        u64::from_be_bytes(first)
    };
    let mut best = (0, 0u64);
    for (i, name) in names.iter().enumerate() {
        let s = score(name);
        if i == 0 || s > best.1 {
            best = (i, s);
        }
    }
    best.0
}

impl PostgresRouter {
    /// Connects to a comma-separated list of `postgres://` URLs (one URL is fine).
    pub fn connect(list: &str) -> Result<PostgresRouter> {
        let configs = split_store_list(list)
            .into_iter()
            .map(PostgresConfig::from_url)
            .collect::<Result<Vec<_>>>()?;
        PostgresRouter::open(configs)
    }

    /// As [`connect`](Self::connect), with the command line's settings over the URLs':
    /// `online_window` (`mwp serve --online-events`) for every server, and the authority
    /// key (transcripts use the transcript key of `@authority`).
    pub fn connect_with(
        list: &str,
        online_window: Option<u64>,
        key: Option<SecretKey>,
        org_policy: Option<std::sync::Arc<mwp_core::audit::OrgPolicies>>,
    ) -> Result<PostgresRouter> {
        let mut configs = split_store_list(list)
            .into_iter()
            .map(PostgresConfig::from_url)
            .collect::<Result<Vec<_>>>()?;
        for config in &mut configs {
            if online_window.is_some() {
                config.online_window = online_window;
            }
            config.org_policy = org_policy.clone();
        }
        if let (Some(key), Some(first)) = (key, configs.first_mut()) {
            first.key = KeySource::Given(Box::new(key));
        }
        PostgresRouter::open(configs)
    }

    /// [`PostgresAuthority::expire_audit`] on every server: the sealed audit logs past their
    /// retention at `now_ms`, deleted (each leaving a signed tombstone) unless `dry_run`.
    pub fn expire_audit(
        &self,
        now_ms: u64,
        dry_run: bool,
    ) -> Result<Vec<super::audit::ExpiredAudit>> {
        let mut out = Vec::new();
        for shard in &self.shards {
            out.extend(shard.expire_audit(now_ms, dry_run)?);
        }
        Ok(out)
    }

    /// The sealed audit artifact of `group`, from the server that holds it.
    pub fn audit_artifact(&self, group: &Id) -> Result<Option<Vec<u8>>> {
        self.shard_for(group).audit_artifact(group)
    }

    /// Opens every server. The first one's key (given, or from its database) becomes every
    /// server's key; a server already holding another key is refused. A key given by
    /// configuration (`--authority-key-file`) stays out of every database: each holds only
    /// its public half.
    pub fn open(configs: Vec<PostgresConfig>) -> Result<PostgresRouter> {
        let mut configs = configs.into_iter();
        let first = configs
            .next()
            .ok_or_else(|| Error::new(Code::Storage, "the store list names no server"))?;
        let given = matches!(first.key, KeySource::Given(_));
        let first = PostgresAuthority::open(first)?;
        let key = first.secret_key().clone();
        let mut shards = vec![first];
        for mut config in configs {
            config.key = KeySource::Given(Box::new(key.clone()));
            shards.push(PostgresAuthority::open_with(config, !given)?);
        }
        for (i, a) in shards.iter().enumerate() {
            if shards[..i].iter().any(|b| b.label() == a.label()) {
                return Err(Error::new(
                    Code::Storage,
                    format!(
                        "two servers in the store list are both named {}; give each shard=NAME",
                        a.label()
                    ),
                ));
            }
        }
        Ok(PostgresRouter { shards })
    }

    /// The servers, in list order.
    pub fn shards(&self) -> &[PostgresAuthority] {
        &self.shards
    }

    /// The server that holds `group`.
    pub fn shard_for(&self, group: &Id) -> &PostgresAuthority {
        let names: Vec<&str> = self.shards.iter().map(PostgresAuthority::label).collect();
        &self.shards[rendezvous(&names, group.as_str())]
    }

    /// Refuses a group that its server does not hold but another does: the server list
    /// changed without the group being moved, and deciding here would fork it.
    fn check_home(&self, group: &Id) -> Result<&PostgresAuthority> {
        let home = self.shard_for(group);
        if self.shards.len() == 1 || home.holds(group)? {
            return Ok(home);
        }
        for other in self.shards.iter().filter(|s| s.label() != home.label()) {
            if other.holds(group)? {
                return Err(Error::new(
                    Code::Storage,
                    format!(
                        "group {group} is stored on {} but the server list routes it to {}; move the group or restore the list",
                        other.label(),
                        home.label()
                    ),
                ));
            }
        }
        Ok(home)
    }

    /// The state of `group` on its server.
    pub fn state(&self, group: &Id) -> Result<Option<GroupState>> {
        self.shard_for(group).state(group)
    }

    /// Forgets every server's caches and idle connections.
    pub fn restart(&self) {
        self.shards.iter().for_each(PostgresAuthority::restart);
    }
}

impl AuthorityService for PostgresRouter {
    fn audit_manifest(&self, group: &Id) -> Result<Option<mwp_core::audit::Manifest>> {
        Ok(self
            .shard_for(group)
            .audit_status(group)?
            .map(|status| status.manifest))
    }

    fn submit(&self, cmd: &Command, now_ms: u64) -> Result<Decision> {
        self.check_home(&cmd.group)?.submit(cmd, now_ms)
    }

    fn events(&self, group: &Id, after: u64, limit: usize) -> Result<Vec<Event>> {
        self.shard_for(group).events(group, after, limit)
    }

    fn receipt(&self, group: &Id, actor: &Id, action: &Id) -> Result<Option<Receipt>> {
        self.shard_for(group).receipt(group, actor, action)
    }

    fn member(&self, group: &Id, actor: &Id) -> Result<Option<mwp_core::state::Member>> {
        self.shard_for(group).member(group, actor)
    }

    fn latest_snapshot(&self, group: &Id) -> Result<Vec<u8>> {
        self.shard_for(group).latest_snapshot(group)
    }

    fn stored_snapshot(&self, group: &Id) -> Result<Option<Vec<u8>>> {
        self.shard_for(group).stored_snapshot(group)
    }

    fn groups(&self) -> Result<Vec<Id>> {
        let mut all = Vec::new();
        for s in &self.shards {
            all.extend(s.groups()?);
        }
        all.sort();
        all.dedup();
        Ok(all)
    }

    fn head_seq(&self, group: &Id) -> Result<u64> {
        self.shard_for(group).head_seq(group)
    }

    fn next_deadline(&self) -> Result<Option<(Id, u64)>> {
        self.next_deadline_except(&[])
    }

    fn next_deadline_except(&self, skip: &[Id]) -> Result<Option<(Id, u64)>> {
        let mut best: Option<(Id, u64)> = None;
        for s in &self.shards {
            if let Some((g, at)) = s.next_deadline_except(skip)? {
                if best.as_ref().is_none_or(|b| (at, &g) < (b.1, &b.0)) {
                    best = Some((g, at));
                }
            }
        }
        Ok(best)
    }

    fn authority_key(&self) -> PublicKey {
        self.shards[0].authority_key()
    }

    fn tick(&self, group: &Id, now_ms: u64) -> Result<Option<Decision>> {
        self.check_home(group)?.tick(group, now_ms)
    }

    fn sign_head(&self, group: &Id, now_ms: u64) -> Result<mwp_core::head::SignedHead> {
        self.shard_for(group).sign_head(group, now_ms)
    }
}

/// Runs transcripts across the servers.
impl Host for PostgresRouter {
    fn submit(&mut self, cmd: &Command, now_ms: u64) -> Result<Decision> {
        AuthorityService::submit(self, cmd, now_ms)
    }
    fn restart(&mut self) -> Result<()> {
        PostgresRouter::restart(self);
        Ok(())
    }
    fn state(&self, group: &Id) -> Option<GroupState> {
        PostgresRouter::state(self, group).ok().flatten()
    }
    fn work_state(&self, group: &Id, work: &Id) -> Option<WorkState> {
        Host::work_state(self.shard_for(group), group, work)
    }
    fn advance(&mut self, group: &Id, now_ms: u64) -> Result<Vec<Decision>> {
        crate::service::advance(self, group, now_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::rendezvous;

    #[test]
    fn routing_is_deterministic_and_moves_little_when_a_server_is_added() {
        let three = ["a:5432/db", "b:5432/db", "c:5432/db"];
        let four = ["a:5432/db", "b:5432/db", "c:5432/db", "d:5432/db"];
        let mut counts = [0usize; 3];
        let mut moved = 0;
        for i in 0..3000 {
            let g = format!("group-{i}");
            let r = rendezvous(&three, &g);
            assert_eq!(r, rendezvous(&three, &g));
            counts[r] += 1;
            let r4 = rendezvous(&four, &g);
            if r4 != r {
                // A group only ever moves to the new server.
                assert_eq!(r4, 3, "{g}");
                moved += 1;
            }
        }
        // Roughly even: each server holds a third, give or take.
        assert!(
            counts.iter().all(|&c| (800..1200).contains(&c)),
            "{counts:?}"
        );
        // Roughly a quarter moves to the new server.
        assert!((500..1000).contains(&moved), "{moved}");
        // The order of the list does not matter, only the names.
        let shuffled = ["c:5432/db", "a:5432/db", "b:5432/db"];
        for i in 0..100 {
            let g = format!("group-{i}");
            assert_eq!(
                three[rendezvous(&three, &g)],
                shuffled[rendezvous(&shuffled, &g)]
            );
        }
    }
}
