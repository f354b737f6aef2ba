// `runAgent`: a long-running worker on the core's agent driver (SPEC §7). It restores the
// driver from its journal, then loops: `pump` (commit write sets, carry transmits to the
// authority, hand out effects and notices), then sleep until the driver's next wake time
// (lease renewals, resends, syncs), a handler's call, or `signal`. Each granted lease runs
// `handlers.run(ctx)`; the ctx records an effect's intent before performing it, charges,
// checkpoints (which yields the lease, SPEC §5), and submits or fails the work. Every write set is durable in the journal before the driver
// acts on it, so a worker killed at any point restarts from the journal where it was. A planner
// (`config.planner: true`) also answers each terminal outcome with `handlers.plan`, whose
// answer becomes the outcome's `expand` (SPEC §7 "Planners").

import { Agent } from "./agent.js";
import { pump } from "./agent.js";
import { AgentError } from "./errors.js";

/** Journal statuses of an effect whose outcome is already recorded. */
const RECORDED = new Set(["observed", "closed"]);

/**
 * Runs an agent until `signal` aborts; resolves once it has stopped (nothing is being written
 * to the journal any more), rejects on a failure it cannot work around (the journal failed).
 *
 * @param {object} options
 * @param {object} options.client the authority: a `Client` (or anything with its `submit`,
 *   `events`, `receipt`, `snapshot` and, without `config.authorityKey`, `authorityKey`)
 * @param {string} options.key the actor's secret key seed (hex)
 * @param {object} options.config `{org, group, actor}` and the driver's options (`capacity`,
 *   `leaseMs`, `syncMs`, …); `authorityKey` defaults to the server's
 * @param {object} [options.handlers] `run(ctx)` for each granted lease (its resolved value,
 *   unless it submitted or failed itself, is submitted as the result; a throw fails the work
 *   as retryable), `notice(n)` for every notice, `settled(view)` after each round with
 *   `{state, leases, agent}`, `error(e)` for a handler's failure, and for a planner
 *   (`config.planner: true`) `plan({trigger, work, item, state})` → the `create_work` bodies
 *   the outcome calls for, or `[]`
 * @param {AbortSignal} [options.signal] stops the worker
 * @param {object} [options.journal] where committed write sets go: `load()` and
 *   `commit(writeSet)` (an `openAgentJournal(path)` file in Node and Deno, an IdbAgentStore in
 *   browsers); without one the worker keeps its state in memory and cannot restart
 * @param {() => number} [options.now] the clock (ms)
 * @param {number} [options.idleMs] longest sleep between rounds (default 1000)
 */
export async function runAgent({ client, key, config, handlers = {}, signal, journal, now = Date.now, idleMs = 1000 } = {}) {
  if (!client || typeof key !== "string" || !config) {
    throw new AgentError("MALFORMED", "runAgent needs {client, key, config: {org, group, actor}}");
  }
  const cfg = { ...config, authorityKey: config.authorityKey ?? (await client.authorityKey()) };
  const image = journal ? await journal.load() : undefined;
  const agent = image && image.serial > 0 ? Agent.restore(cfg, key, image) : new Agent(cfg, key);
  agent.handleConnectivity(true, now());

  const runs = new Map(); // work → {lease, controller}
  const pending = new Map(); // effect key → {fn, resolve, reject}
  const dispatched = new Map(); // effect key → the driver's dispatch
  let waiters = [];
  let later = [];
  let wake;
  let stopped = false;

  /**
   * Resolves after the next whole round (the caller's write sets committed and carried);
   * `force` starts one now, else it waits for the next one the driver's timers start.
   */
  const round = (force = true) =>
    stopped
      ? Promise.reject(new AgentError("INVALID_STATE", "the worker has stopped"))
      : new Promise((resolve, reject) => {
          (force ? waiters : later).push({ resolve, reject });
          if (force) wake?.();
        });
  const live = (what) => {
    if (stopped) throw new AgentError("INVALID_STATE", `the worker has stopped: ${what} not sent`);
  };
  const report = (e) => {
    try {
      handlers.error?.(e);
    } catch {
      // A failing error handler has nowhere further to report to.
    }
  };

  /** Performs a dispatched effect once its function is known (either may come first). */
  function perform(effectKey) {
    const d = dispatched.get(effectKey);
    const p = pending.get(effectKey);
    if (!d || !p) return;
    dispatched.delete(effectKey);
    pending.delete(effectKey);
    Promise.resolve()
      .then(() => p.fn({ key: d.key, attempt: d.attempt, target: d.target }))
      .then(
        (outcome) => {
          if (stopped) return p.reject(new AgentError("INVALID_STATE", "the worker stopped while the effect ran"));
          try {
            agent.handleEffectOutcome(d.key, outcome ?? null, null, now());
          } catch (e) {
            return p.reject(e);
          }
          p.resolve(outcome ?? null);
          wake?.();
        },
        // The outcome is unknown: the driver reports it `uncertain` after its timeout.
        (e) => p.reject(e),
      );
  }

  function start(n) {
    const controller = new AbortController();
    runs.set(n.work, { lease: n.lease, controller });
    let done = false;
    const settle = async (what, act) => {
      live(what);
      if (done) throw new AgentError("INVALID_STATE", `${n.work} was already checkpointed, submitted or failed in this run`);
      done = true;
      act();
      await round();
    };
    const ctx = {
      work: n.work,
      lease: n.lease,
      epoch: n.epoch,
      resumed: n.resumed,
      /** The data of the last checkpoint, or null. */
      saved: n.checkpoint?.data ?? null,
      /** The work item as the replica holds it (state, attempts, contract, …). */
      item: agent.state()?.work?.[n.work] ?? null,
      signal: controller.signal,
      /**
       * Records `data` and yields the lease (SPEC §5: the work returns to `queued`); the next
       * run of the work, here or on another worker, starts with it as `saved`. Ends this run.
       */
      checkpoint: (data) => settle("checkpoint", () => agent.checkpoint(n.work, data ?? null, now())),
      /** Charges `cost` against the work's budget, with optional checkpoint `data`, keeping the lease. */
      async charge(cost, data) {
        live("charge");
        agent.charge(n.work, cost, data, now());
        await round();
      },
      /**
       * Performs an effect exactly once per lease epoch: its intent is recorded (journal and
       * authority) before `fn({key, attempt, target})` runs; its result is the outcome. An
       * effect whose outcome is already recorded (a restart) resolves to it without running.
       */
      async effect(op, fn, options = {}) {
        live("effect");
        let effectKey;
        try {
          effectKey = agent.intendEffect(n.work, op, options, now());
        } catch (e) {
          if (e?.code !== "ALREADY_EXISTS" || typeof e.details?.key !== "string") throw e;
          effectKey = e.details.key;
        }
        const entry = agent.effects()[effectKey];
        if (entry?.status === "uncertain") {
          throw new AgentError("EFFECT_UNSETTLED", `effect ${op} on ${n.work} may or may not have happened: reconcile it first`, { key: effectKey });
        }
        if (entry && RECORDED.has(entry.status) && entry.happened === false) {
          throw new AgentError("INVALID_STATE", `effect ${op} on ${n.work} was closed without happening`, { key: effectKey });
        }
        const outcome =
          entry && RECORDED.has(entry.status)
            ? entry.outcome ?? null
            : await new Promise((resolve, reject) => {
                pending.set(effectKey, { fn, resolve, reject });
                perform(effectKey);
                wake?.();
              });
        // Settled at the authority before the handler goes on (a submit needs it settled).
        for (;;) {
          const e = agent.effects()[effectKey];
          if (!e || e.status === "closed") return outcome;
          if (controller.signal.aborted) throw new AgentError("LEASE_EXPIRED", `the lease on ${n.work} ended before effect ${op} was settled`, { key: effectKey });
          await round(false);
        }
      },
      /** Submits the result; resolves once sent. */
      submit: (result) => settle("submit", () => agent.submit(n.work, result ?? null, now())),
      /** Fails the work (`retryable` lets the authority offer it again). */
      fail: (error, { retryable = false } = {}) => settle("fail", () => agent.fail(n.work, error ?? null, { retryable }, now())),
    };
    Promise.resolve()
      .then(() => handlers.run?.(ctx))
      .then(
        (result) => (done || controller.signal.aborted || stopped ? undefined : ctx.submit(result)),
        (e) => {
          if (controller.signal.aborted || stopped) return undefined;
          report(e);
          return done ? undefined : ctx.fail({ message: String(e?.message ?? e) }, { retryable: true });
        },
      )
      .catch(report);
  }

  /**
   * A planner's question (`config.planner`): `handlers.plan({trigger, work, item, state})`
   * answers with the `create_work` bodies its outcome calls for, or `[]` (the empty
   * disposition). Its answer goes to the journal before it is sent; a throw or a missing
   * handler leaves the trigger pending (asked again after a restart), and the driver claims
   * nothing meanwhile.
   */
  function plan(n) {
    Promise.resolve()
      .then(() => {
        if (!handlers.plan) throw new AgentError("INVALID_STATE", `planner without a plan handler: trigger ${n.trigger} stays pending`);
        const state = agent.state();
        return handlers.plan({ trigger: n.trigger, work: n.work, item: state?.work?.[n.work] ?? null, state });
      })
      .then((items) => {
        if (stopped) return;
        agent.dispose(n.trigger, items ?? [], now());
        wake?.();
      })
      .catch(report);
  }

  async function onNotice(n) {
    try {
      await handlers.notice?.(n);
    } catch (e) {
      report(e);
    }
    if (n.type === "plan") {
      plan(n);
    } else if (n.type === "run") {
      if (runs.get(n.work)?.lease !== n.lease) start(n);
    } else if (n.type === "released" || n.type === "lease_lost") {
      const r = runs.get(n.work);
      if (r && r.lease === n.lease) {
        runs.delete(n.work);
        r.controller.abort();
      }
    }
  }

  const dispatch = (d) => {
    dispatched.set(d.key, d);
    perform(d.key);
    return undefined;
  };
  const commit = journal ? (ws) => journal.commit(ws) : () => {};

  let failure;
  try {
    while (!signal?.aborted) {
      const these = [...waiters, ...later];
      waiters = [];
      later = [];
      const due = await pump(agent, { client, commit, dispatch, onNotice, now });
      for (const w of these) w.resolve();
      try {
        await handlers.settled?.({ state: agent.state(), leases: agent.leases(), agent });
      } catch (e) {
        report(e);
      }
      if (waiters.length > 0 || signal?.aborted) continue;
      const delay = Math.max(0, Math.min(due === undefined ? idleMs : due - now(), idleMs));
      await new Promise((resolve) => {
        const timer = setTimeout(done, delay);
        function done() {
          clearTimeout(timer);
          signal?.removeEventListener("abort", done);
          wake = undefined;
          resolve();
        }
        wake = done;
        signal?.addEventListener("abort", done, { once: true });
      });
    }
  } catch (e) {
    failure = e;
  } finally {
    stopped = true;
    const why = new AgentError("INVALID_STATE", "the worker has stopped");
    for (const w of [...waiters, ...later]) w.reject(why);
    waiters = [];
    later = [];
    for (const r of runs.values()) r.controller.abort();
    for (const p of pending.values()) p.reject(why);
  }
  if (failure) throw failure;
}
