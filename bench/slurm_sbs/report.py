"""The printed comparison of one run: Slurm's figures against the engine's on the same trace."""


def report(res):
    s = res.get("slurm")
    gov = res["profile"] == "gov"
    e = res["engine"]["fair" if gov else "fcfs"]
    print()
    print(f"=== {'Slurm-Gov' if gov else 'Slurm-FIFO'} vs engine (FairShare "
          f"{'Enabled' if gov else 'Disabled'}), tier {res['tier']} seed {res['seed']}"
          f"{' workloads ' + str(res['workloads']) if res['workloads'] >= 0 else ''}, "
          f"compression x{res['compression']:.0f} ===")
    if not s:
        print("no Slurm figures (the run failed; see the log above)")
        return
    print(f"Slurm: {s['jobs_started']} jobs started, {s['rejected']} rejected at submit, "
          f"drained={s['drained']}, wall {s['wall_s']:.0f} s, slurmctld CPU "
          f"{s['ctld_cpu_s']:.1f} s (all slurmds {s['slurmd_cpu_s']:.1f} s"
          + "".join(f", {k} {v:.1f} s" for k, v in s.get("db_cpu_s", {}).items())
          + "), slurmctld RSS max "
          f"{s['ctld_rss_mib_max']:.0f} MiB, slurmd RSS max {s['slurmd_rss_mib_max']:.0f} MiB")
    print(f"       started/wall-s {s['started_per_wall_s']:.1f}, started/slurmctld-CPU-s "
          f"{s['started_per_ctld_cpu_s']:.1f}; main sched cycle mean "
          f"{s['sdiag_main']['mean_cycle_us']} us max {s['sdiag_main']['max_cycle_us']} us "
          f"({s['sdiag_main']['total_cycles']} cycles); backfill cycle mean "
          f"{s['sdiag_backfill']['mean_cycle_us']} us max {s['sdiag_backfill']['max_cycle_us']}"
          f" us, {s['sdiag_backfill']['total_backfilled']} backfilled")
    print(f"Engine: {e['started_jobs']} jobs started ({e['admissions']} admissions, "
          f"{e['preemptions']} preemptions, {e['never_fits']} never-fit), "
          f"{e['decisions_per_cpu_s']:.0f} decisions/CPU-s, {e['admissions_per_cpu_s']:.0f} "
          f"admissions/CPU-s; cycle p50 {e['cycle_us']['p50']:.1f} p99 {e['cycle_us']['p99']:.1f}"
          f" max {e['cycle_us']['max']:.1f} us")
    r1 = e["decisions_per_cpu_s"] / s["started_per_ctld_cpu_s"] if s["started_per_ctld_cpu_s"] else 0
    r2 = e["admissions_per_cpu_s"] / s["started_per_ctld_cpu_s"] if s["started_per_ctld_cpu_s"] else 0
    print(f"ratio engine decisions/CPU-s : Slurm starts/slurmctld-CPU-s = {r1:.0f}x "
          f"(admissions only: {r2:.0f}x)")
    mc = s["sdiag_main"]["mean_cycle_us"] or 0
    xc = s["sdiag_main"]["max_cycle_us"] or 0
    print(f"engine p99 cycle {e['cycle_us']['p99']:.0f} us vs Slurm main cycle mean {mc} us "
          f"/ max {xc} us; backfill mean {s['sdiag_backfill']['mean_cycle_us']} us")
    print(f"makespan (trace s): engine {e['makespan_s']:.0f}, Slurm {s['makespan_s']:.0f} "
          f"(ratio {s['makespan_s'] / e['makespan_s']:.2f})" if e["makespan_s"] else "")
    print("wait (trace s)      n       p50       p90       p99       max")
    for name, d in (("engine", e["wait_s"]), ("Slurm", s["wait_s"])):
        print(f"  {name:<10} {d['n']:>7} {d['p50']:>9.0f} {d['p90']:>9.0f} {d['p99']:>9.0f} "
              f"{d['max']:>9.0f}")
    for c in sorted(set(e["wait_s_by_class"]) | set(s["wait_s_by_class"])):
        de, ds = e["wait_s_by_class"].get(c, {}), s["wait_s_by_class"].get(c, {})
        print(f"  {c:<16} p50 engine {de.get('p50', 0):>8.0f} Slurm {ds.get('p50', 0):>8.0f}"
              f"   p99 engine {de.get('p99', 0):>8.0f} Slurm {ds.get('p99', 0):>8.0f}")
    print(f"       job records by state: {s['jobcomp_states']}; {s['cancelled_pending']} "
          f"cancelled while pending, {s.get('never_fit_cancelled', 0)} of them larger than "
          "their partition (PartitionNodeLimit, cancelled by the driver)")
    if gov:
        q = s.get("quota", {})
        print(f"quotas: Slurm {q.get('starts_over_cap')} run starts above their partition's "
              f"GrpTRES cap, {q.get('teams_over_cap')} (team, type) above nominal + borrow; "
              f"{s.get('preempted_runs', 0)} runs preempted (requeued); "
              f"{s.get('over_cap_not_submitted', 0)} jobs above every cap of their team not "
              f"submitted; engine invariant violations {e.get('violations')}, "
              f"{e['preemptions']} preemptions, {e['never_fits']} never-fit")
        print(f"       highest peak/cap: {q.get('worst')}")
        qe = s["submission"].get("quota_events", {})
        if qe:
            print(f"quota events: {qe['applied']} of {qe['in_trace']} applied "
                  f"({qe['failed']} failed, {qe['sacctmgr_calls']} sacctmgr calls, "
                  f"{qe['apply_s_total']:.1f} s in all); per event p50 "
                  f"{qe['apply_s']['p50']:.2f} s max {qe['apply_s']['max']:.2f} s; done after "
                  f"its instant p50 {qe['lateness_s']['p50']:.2f} s p99 "
                  f"{qe['lateness_s']['p99']:.2f} s; parts not created: "
                  f"{qe['skipped_parts'] or 'none'}; "
                  f"{s.get('above_final_caps_cancelled', 0)} jobs pending above their "
                  "team's final caps cancelled by the driver")
        print("Semantic gaps: Slurm cannot keep DontLend teams' idle nodes from other teams "
              "(only per-team reservations could); borrowing is capped per team "
              "(nominal x BorrowLimit %), not by the lendable idle pool of the cohort, and "
              "Lend-only teams' lending limits have no counterpart; a job above nominal runs "
              "only in the opportunistic partition, and a job that starts there while its "
              "team is under nominal is preemptable all the same; jobs above nominal + "
              "borrow are not submitted (the engine's never-fit); partition_prio "
              "does reclaim only, so in-team priority preemption and fair-share preemption "
              "are absent; QOS priority + fair-share factor order the queue instead of "
              "per-team queues; Slurm places and backfills with the true runtime as --time; "
              "caps are vCPU standing for the instance share; 1 s time resolution "
              "(= compression trace-seconds); quota events are replayed as cap changes, "
              "but a Disabled or deleted team's running jobs keep running unpreemptable "
              "in its guaranteed partition (the engine makes them reclaimable borrowers).")
        return
    print("Semantic gaps: Slurm-FIFO has no quotas, borrowing, fair share or preemption (the "
          "engine enforces nominal quotas + borrow limits, so it admits less at once); Slurm "
          "places jobs on nodes and backfills with reservations using the true runtime "
          "(given as --time), the engine admits at quota level only; Slurm times have 1 s "
          "resolution (= compression trace-seconds), the engine ticks every 1 trace-second; "
          "gangs larger than their partition pend forever on Slurm (cancelled by the "
          "driver), larger than the team's cap only (never-fit for the engine) run on "
          "Slurm; quota churn is not replayed.")
