// Signed commands for the tests, with the transcript runner's derived keys.
export function makeCommands(mwp, { org = "acme", group = "g1" } = {}) {
  const key = (actor) => mwp.transcriptSecretKey(actor);
  const pub = (actor) => mwp.publicKeyOf(key(actor));
  const cmd = (actor, action, body, expect) =>
    mwp.signCommand({ org, group, actor, action, session: 1, ...(expect === undefined ? {} : { expect }), body }, key(actor));
  const contract = { max_attempts: 3, backoff_base_ms: 100, backoff_max_ms: 1000, cost_budget: 10, risk: "low" };
  return {
    key,
    pub,
    cmd,
    open: () =>
      cmd("alice", "open", {
        type: "open_group", mission: "m1", title: "Ship it", authority_key: pub("@authority"),
        members: [
          { actor: "alice", role: "owner", key: pub("alice") },
          { actor: "bob", role: "worker", key: pub("bob") },
        ],
      }),
    create: (work, action = `create-${work}`, after = []) =>
      cmd("alice", action, { type: "create_work", work, contract, after, spec: { do: work } }),
    claim: (work, action, expect) => cmd("bob", action, { type: "claim_work", work, lease_ms: 30000, start_within_ms: 5000 }, expect),
  };
}
