//! The mission of `mwp demo`, step by step, and the final check of its signed snapshot
//! against the authority key and a fresh replica.

use super::cast::*;
use super::*;

/// Steps the story counts (for the progress bar).
pub(super) const STEPS: u64 = 37;

/// Runs the mission against the server at `base`, keeping the agents' journals under
/// `data`; returns the summary.
pub fn mission(base: &str, data: &Path, story: &Story) -> Step<Summary> {
    let client = Client::new(base);
    let authority = client
        .authority_key()
        .map_err(err("reading the authority key"))?;
    let n = client.groups().map_err(err("listing groups"))?.len() + 1;
    let org = id("acme");
    let group = Id::new(format!("launch-{n}")).map_err(|e| e.to_string())?;
    let journals = data.join("agents").join(group.as_str());
    // A journal left by an earlier demo whose group never opened is not this agent's.
    let _ = std::fs::remove_dir_all(&journals);
    private_dirs(&journals).map_err(|e| format!("cannot create {}: {e}", journals.display()))?;
    let crew = Crew {
        base,
        org: org.clone(),
        group: group.clone(),
        authority,
        roster: Roster::new()?,
        journals,
    };
    let mut olivia = crew.admin("olivia");
    let mut rex = crew.admin("rex");
    let mut ada = crew.worker("ada")?;
    let mut ben = crew.worker("ben")?;
    let mut cy = crew.worker("cy")?;
    let mut pia = crew.planner("pia")?;
    let mut fx = no_effects;
    // Every disposition pia makes, and how many `expand` events each trigger ends with.
    let mut disposed: Vec<Disposed> = Vec::new();
    let fetch_client = Client::new(base);
    let group_of_rule = group.clone();
    // pia's rule: fetch's result says how many shards it found, and each shard gets an
    // archiving item once the customers are notified; every other outcome calls for nothing.
    let rule = move |trigger: u64, work: &Id, _: &GroupState| -> Step<Vec<NewWork>> {
        if work.as_str() != "fetch" {
            return Ok(Vec::new());
        }
        let event = fetch_client
            .events(&group_of_rule, trigger - 1, 1)
            .map_err(err("reading the trigger"))?
            .pop()
            .ok_or("the trigger is not in the log")?;
        let shards = match &event.kind {
            EventKind::WorkSucceeded(s) => s.result.to_json()["shards"].as_u64().unwrap_or(0),
            _ => 0,
        };
        Ok((1..=shards)
            .map(|n| NewWork {
                tag: None,
                work: id(&format!("shard-{n}")),
                contract: contract(3),
                after: vec![id("notify")],
                spec: json!({ "task": format!("archive shard {n} of {shards}") }).into(),
            })
            .collect())
    };
    // Duplicates counted by agents that crashed.
    let mut duplicates = 0;

    // Genesis and the work graph.
    let members = MEMBERS
        .iter()
        .map(|(name, role)| MemberSpec {
            actor: id(name),
            role: *role,
            key: crew.roster.key(name).public(),
        })
        .collect();
    olivia.send(Body::OpenGroup(OpenGroup {
        mission: id("launch"),
        title: json!("Launch the new pricing page").into(),
        members,
        authority_key: authority,
    }))?;
    story.step(
        "olivia",
        &format!(
            "opens group {group} with ada, ben, cy (workers), pia (the planner) and rex (reviewer)"
        ),
    );
    let graph: [(&str, &[&str], &str); 5] = [
        ("fetch", &[], "fetch last quarter's sales"),
        ("clean", &["fetch"], "clean the data"),
        ("train", &["clean"], "fit the price model"),
        ("report", &["clean"], "write the report"),
        ("notify", &["train", "report"], "email the customers"),
    ];
    for (work, after, spec) in graph {
        olivia.send(Body::CreateWork(CreateWork {
            work: id(work),
            contract: contract(3),
            after: after.iter().map(|a| id(a)).collect(),
            spec: json!({ "task": spec }).into(),
        }))?;
        story.step("olivia", &format!("creates {work} (after {after:?})"));
    }

    // fetch: a checkpoint, then a submit whose answer is lost, sent again, landing once.
    ada.agent_mut().set_capacity(1);
    ada.until("fetch to run", &mut fx, |_, n| run_of(n, "fetch"))?;
    story.step("ada", "claims and starts fetch");
    ada.agent_mut()
        .checkpoint(
            now_ms(),
            &id("fetch"),
            json!({"rows_fetched": 50_000, "next_page": 51}),
        )
        .map_err(err("ada checkpoint fetch"))?;
    ada.until("her checkpoint", &mut fx, |_, n| {
        released(n, "fetch").then_some(())
    })?;
    story.step(
        "ada",
        "checkpoints fetch at 50,000 rows (the lease is released)",
    );
    let run = ada.until("fetch to run again", &mut fx, |_, n| run_of(n, "fetch"))?;
    ada.agent_mut().set_capacity(0);
    story.step(
        "ada",
        &format!(
            "claims fetch again (epoch {}) and resumes from {}",
            run.epoch,
            run.from()
        ),
    );
    ada.host.lose_answers(1);
    ada.agent_mut()
        .submit(
            now_ms(),
            &id("fetch"),
            json!({"rows": 100_000, "shards": 3}),
        )
        .map_err(err("ada submit fetch"))?;
    let first = ada.until("her submit to be sent", &mut fx, |a, _| {
        a.lost().first().cloned()
    })?;
    story.step(
        "ada",
        &format!("submits fetch (seq {}), but the answer is lost", first.seq),
    );
    let again = ada.until("her submit to be answered", &mut fx, |a, _| {
        a.duplicates().first().cloned()
    })?;
    if again != first {
        return Err("a resent submit was not answered with its original receipt".into());
    }
    story.step(
        "ada",
        &format!(
            "her driver sends it again: Duplicate, same receipt (seq {}), nothing appended",
            again.seq
        ),
    );

    // pia plans: fetch's outcome decides how many items follow. She is asked, and crashes
    // before answering; restarted from her journal, the outcome still has no disposition, so
    // she is asked again before anything else, and the expansion lands once.
    let (trigger, _) = loop {
        if let Some(plan) = pia.next_plan()? {
            if plan.1.as_str() == "fetch" {
                break plan;
            }
        }
    };
    story.step(
        "pia",
        &format!(
            "is asked what fetch's outcome (seq {trigger}) calls for, and crashes before answering"
        ),
    );
    drop(pia);
    let mut pia = crew.planner("pia")?;
    let head = olivia.state()?.seq;
    let replayed = pia.settle_plans(head, &rule)?;
    let again: Vec<&Disposed> = replayed.iter().filter(|d| d.0 == trigger).collect();
    if again.len() != 1 {
        return Err(format!(
            "fetch's disposition was made {} times after the restart",
            again.len()
        ));
    }
    story.step(
        "pia",
        &format!(
            "restarts: fetch's outcome has no disposition yet, so it comes first: expands into {}",
            again[0]
                .2
                .iter()
                .map(Id::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    disposed.extend(replayed);

    // clean: a retryable failure and a retry after the backoff.
    ben.agent_mut().set_capacity(1);
    ben.until("clean to run", &mut fx, |_, n| run_of(n, "clean"))?;
    story.step("ben", "claims and starts clean");
    ben.agent_mut()
        .fail(
            now_ms(),
            &id("clean"),
            json!({"error": "database timeout"}),
            true,
        )
        .map_err(err("ben fail clean"))?;
    let item = ben.until("his failure to land", &mut fx, |a, n| {
        released(n, "clean").then(|| item_of(a, "clean")).flatten()
    })?;
    story.step(
        "ben",
        &format!(
            "fails clean (retryable): attempt {} of {}, back in the queue after its backoff",
            item.attempts, item.contract.max_attempts
        ),
    );
    let run = ben.until("clean to run again", &mut fx, |_, n| run_of(n, "clean"))?;
    ben.agent_mut().set_capacity(0);
    ben.agent_mut()
        .submit(now_ms(), &id("clean"), json!({"rows": 98_412}))
        .map_err(err("ben submit clean"))?;
    ben.until("his submit to land", &mut fx, |_, n| {
        released(n, "clean").then_some(())
    })?;
    story.step(
        "ben",
        &format!(
            "retries clean after the backoff (epoch {}) and succeeds",
            run.epoch
        ),
    );

    // train and report run side by side: cy on train, ada on report. Both are ready; a
    // driver takes ready work in an order of its own (a hash of actor and work), which puts
    // train first for cy, so cy claims first and ada takes what is left.
    cy.agent_mut().set_capacity(1);
    cy.until("train to run", &mut fx, |_, n| run_of(n, "train"))?;
    story.step("cy", "claims and starts train");
    cy.agent_mut()
        .charge(
            now_ms(),
            &id("train"),
            30,
            Some(json!({"epochs_done": 6, "loss": "0.031"}).into()),
        )
        .map_err(err("cy charge train"))?;
    cy.until("his charge to land", &mut fx, |a, _| {
        a.agent().outbox().is_empty().then_some(())
    })?;
    story.step(
        "cy",
        "charges 30 (GPU minutes) with a checkpoint after 6 epochs",
    );
    ada.agent_mut().set_lease_ms(SHORT_LEASE_MS);
    ada.agent_mut().set_capacity(1);
    ada.until("report to run", &mut fx, |_, n| run_of(n, "report"))?;
    ada.agent_mut().set_capacity(0);
    story.step(
        "ada",
        &format!("claims report with a {SHORT_LEASE_MS} ms lease and starts it"),
    );
    // From here on ada's host does not run at all until she wakes up.
    story.step("ada", "stalls (a long pause) and stops renewing her lease");
    duplicates += cy.host.duplicates().len();
    drop(cy);
    story.step("cy", "crashes (process killed)");
    // The restarted process: its image is what its journal holds.
    let mut cy = crew.worker("cy")?;
    cy.agent_mut()
        .replace_session(now_ms())
        .map_err(err("cy replace_session"))?;
    cy.until("his new session", &mut fx, |a, _| {
        let me = a.agent().replica().state()?.members.get("cy")?;
        (me.session == 2 && a.agent().outbox().is_empty()).then_some(())
    })?;
    story.step(
        "cy",
        "restarts from his journal with session 2: the old lease is revoked, train goes back to the queue",
    );
    cy.agent_mut().set_capacity(1);
    let run = cy.until("train to run again", &mut fx, |_, n| run_of(n, "train"))?;
    cy.agent_mut().set_capacity(0);
    story.step(
        "cy",
        &format!(
            "claims train (epoch {}) and resumes from {}",
            run.epoch,
            run.from()
        ),
    );
    cy.agent_mut()
        .submit(
            now_ms(),
            &id("train"),
            json!({"model": "price-v2", "epochs": 10}),
        )
        .map_err(err("cy submit train"))?;
    cy.until("his submit to land", &mut fx, |_, n| {
        released(n, "train").then_some(())
    })?;
    story.step("cy", "submits train");
    ben.until("report's lease to expire", &mut fx, |a, _| {
        item_of(a, "report")
            .is_some_and(|w| w.state == WorkState::Queued && w.epoch == 1)
            .then_some(())
    })?;
    story.step(
        "mwp",
        "tick: ada's lease on report expired; report is back in the queue",
    );
    ben.agent_mut().set_capacity(1);
    let run = ben.until("report to run", &mut fx, |_, n| run_of(n, "report"))?;
    ben.agent_mut().set_capacity(0);
    ben.agent_mut()
        .submit(now_ms(), &id("report"), json!({"pages": 12}))
        .map_err(err("ben submit report"))?;
    ben.until("his submit to land", &mut fx, |_, n| {
        released(n, "report").then_some(())
    })?;
    story.step(
        "ben",
        &format!("claims report (epoch {}) and submits it", run.epoch),
    );
    // ada wakes up with the work done, her view as it was when she stalled.
    ada.agent_mut()
        .submit(now_ms(), &id("report"), json!({"pages": 9, "draft": true}))
        .map_err(err("ada submit report"))?;
    let late = ada.until("her late submit to land", &mut fx, |_, n| {
        n.iter().find_map(|n| match n {
            Notice::Evidence { receipt, .. } => Some(receipt.clone()),
            _ => None,
        })
    })?;
    if late.disposition != Disposition::Evidence {
        return Err("ada's late submit was not recorded as evidence".into());
    }
    story.step(
        "ada",
        &format!(
            "wakes up and submits: recorded as evidence (seq {}), ben's result stands",
            late.seq
        ),
    );

    // notify: an undeclared effect whose outcome is lost, then reconciled.
    ben.agent_mut().set_lease_ms(SHORT_LEASE_MS);
    ben.agent_mut().set_capacity(1);
    ben.until("notify to run", &mut fx, |_, n| run_of(n, "notify"))?;
    ben.agent_mut().set_capacity(0);
    story.step(
        "ben",
        &format!("claims notify with a {SHORT_LEASE_MS} ms lease and starts it"),
    );
    ben.agent_mut()
        .intend_effect(
            now_ms(),
            &id("notify"),
            &id("email-customers"),
            EffectMode::Undeclared,
            false,
            json!({"to": "customers@example.com", "template": "new-prices"}),
        )
        .map_err(err("ben intend_effect"))?;
    let sent = Cell::new(None);
    let mut send_email = |d: &Dispatch| -> Observed {
        // The mailer is called here; ben crashes before its answer is recorded.
        sent.set(Some(d.key));
        None
    };
    let sent = ben.until("the email to go out", &mut send_email, |_, _| sent.get())?;
    story.step(
        "ben",
        &format!(
            "records the intent to email the customers (effect {}), sends the email…",
            &sent.to_hex()[..12]
        ),
    );
    duplicates += ben.host.duplicates().len();
    drop(ben);
    story.step("ben", "…and crashes before recording the outcome");
    rex.wait_for("notify to wait on its unknown effect", |s| {
        s.work
            .get("notify")
            .is_some_and(|w| w.state == WorkState::Waiting)
    })?;
    story.step(
        "mwp",
        "the lease expires: the email may or may not have gone out, so notify waits",
    );
    let item = rex.item("notify")?;
    let (key, _) = item
        .unknown()
        .next()
        .ok_or("notify waits on no unknown effect")?;
    rex.send(Body::ReconcileEffect(ReconcileEffect {
        work: id("notify"),
        key: *key,
        happened: true,
        receipt: json!({"provider": "mailer", "message_id": "msg-8841", "status": "delivered"})
            .into(),
    }))?;
    story.step(
        "rex",
        "checks the mail provider: it was delivered; reconciles the effect (happened)",
    );
    cy.agent_mut().set_capacity(1);
    cy.until("notify to run", &mut fx, |_, n| run_of(n, "notify"))?;
    cy.agent_mut().set_capacity(0);
    let already = item_of(&cy.host, "notify").is_some_and(|w| {
        w.effects
            .values()
            .any(|e| e.op.as_str() == "email-customers" && e.happened == Some(true))
    });
    if !already {
        return Err("the reconciled effect is not visible to the next owner".into());
    }
    cy.agent_mut()
        .submit(
            now_ms(),
            &id("notify"),
            json!({"emails": "sent once (reconciled)"}),
        )
        .map_err(err("cy submit notify"))?;
    cy.until("his submit to land", &mut fx, |_, n| {
        released(n, "notify").then_some(())
    })?;
    story.step(
        "cy",
        "claims notify, sees the email already went out, and completes without resending",
    );

    // The shards the planner added run once notify is done; cy archives each.
    cy.agent_mut().set_capacity(1);
    let shards: Vec<Id> = disposed.iter().flat_map(|d| d.2.clone()).collect();
    for _ in &shards {
        // The driver takes ready work in an order of its own: whichever shard comes.
        let shard = cy.until("a shard to run", &mut fx, |_, n| {
            shards
                .iter()
                .find(|w| run_of(n, w.as_str()).is_some())
                .cloned()
        })?;
        let shard = &shard;
        cy.agent_mut()
            .submit(now_ms(), shard, json!({"archived": true}))
            .map_err(err("cy submit shard"))?;
        cy.until("his submit to land", &mut fx, |_, n| {
            released(n, shard.as_str()).then_some(())
        })?;
    }
    cy.agent_mut().set_capacity(0);
    story.step(
        "cy",
        &format!("runs the {} shard items the planner added", shards.len()),
    );
    let head = olivia.state()?.seq;
    let rest = pia.settle_plans(head, &rule)?;
    story.step(
        "pia",
        &format!(
            "disposes of the {} other outcomes with the empty disposition (nothing follows them)",
            rest.len()
        ),
    );
    disposed.extend(rest);

    // Archive, then check the final snapshot.
    olivia.send(Body::Archive(Archive {
        reason: json!("mission complete").into(),
    }))?;
    story.step(
        "olivia",
        "archives the group: the authority signs a final snapshot",
    );
    duplicates += ada.host.duplicates().len() + cy.host.duplicates().len();
    let mut summary = verify(&client, &group, &org, authority, duplicates)?;
    summary.planner = planner_summary(&client, &group, trigger)?;
    story.step(
        "check",
        "the final snapshot verifies, and a fresh replica of the log agrees",
    );
    Ok(summary)
}

/// What the log says of the planner's work: the expansions with their triggers, and how many
/// `expand` events fetch's outcome got (one, though pia crashed before answering).
fn planner_summary(client: &Client, group: &Id, fetch_trigger: u64) -> Step<PlannerCheck> {
    let mut expansions = Vec::new();
    let mut empty = 0;
    let mut fetch_expands = 0;
    let mut after = 0;
    loop {
        let events = client.events(group, after, 500).map_err(err("replaying"))?;
        let Some(last) = events.last() else { break };
        after = last.seq;
        for e in events {
            if let EventKind::WorkExpanded(x) = &e.kind {
                if x.trigger == fetch_trigger {
                    fetch_expands += 1;
                }
                if x.work.is_empty() {
                    empty += 1;
                } else {
                    expansions.push(format!(
                        "seq {} expands seq {} into {}",
                        e.seq,
                        x.trigger,
                        x.work
                            .iter()
                            .map(|w| w.work.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
            }
        }
    }
    Ok(PlannerCheck {
        expansions,
        empty,
        fetch_expands,
        restarts: 1,
    })
}

/// Checks the final snapshot and summarises the group.
fn verify(
    client: &Client,
    group: &Id,
    org: &Id,
    authority: PublicKey,
    duplicates: usize,
) -> Step<Summary> {
    let bytes = client
        .snapshot(group)
        .map_err(err("fetching the final snapshot"))?;
    let snap = Snapshot::from_cbor(&bytes).map_err(err("decoding the final snapshot"))?;
    let verified = Snapshot::verify_bytes(&bytes, &authority, org, group, 0).is_ok();
    // A fresh replica, rebuilt from the whole log over HTTP.
    let mut fresh = Replica::new(group.clone());
    loop {
        let events = client
            .events(group, fresh.cursor(), 500)
            .map_err(err("replaying"))?;
        if events.is_empty() {
            break;
        }
        for e in events {
            if let Offer::Rejected(e) = fresh.offer(e) {
                return Err(format!("the log does not replay: {e}"));
            }
        }
    }
    let replica_agrees =
        fresh.cursor() == snap.seq && fresh.state_hash().ok() == Some(snap.state_hash);
    let state = &snap.state;
    Ok(Summary {
        group: group.clone(),
        events: state.seq,
        receipts: state
            .receipts
            .values()
            .map(|by_action| by_action.len())
            .sum(),
        duplicates,
        epochs: state
            .work
            .iter()
            .map(|(w, i)| (w.to_string(), i.epoch))
            .collect(),
        evidence: state.evidence.len(),
        effects: state
            .work
            .iter()
            .flat_map(|(w, i)| {
                i.effects.values().map(move |e| {
                    let status = match (e.status, e.happened) {
                        (EffectStatus::Reconciled, Some(true)) => {
                            "unknown, then reconciled: it happened".to_owned()
                        }
                        (EffectStatus::Reconciled, _) => {
                            "unknown, then reconciled: it did not happen".to_owned()
                        }
                        (s, _) => format!("{s:?}").to_lowercase(),
                    };
                    format!(
                        "{w}/{} ({}): {status}",
                        e.op,
                        format!("{:?}", e.mode).to_lowercase()
                    )
                })
            })
            .collect(),
        work: state
            .work
            .iter()
            .map(|(w, i)| (w.to_string(), i.state.as_str().to_owned()))
            .collect(),
        snapshot: SnapshotCheck {
            seq: snap.seq,
            state_hash: snap.state_hash,
            signer: snap.signer,
            verified,
            replica_agrees,
        },
        dashboard: format!("{}/?group={group}", client.base()),
        planner: PlannerCheck::default(),
        audit: None,
    })
}
