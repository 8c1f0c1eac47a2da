#!/usr/bin/python3
"""deploy/grafana/podium-dashboard.json: every query names a metric (and labels,
and literal label values) that a running podium-scheduler exports on /metrics.

The scrape comes from podium-plugin-host + podium-scheduler (metrics on a free
loopback port) after podium-sim placed integration/clusters/podiumctl.yaml
(pods scheduled and one unschedulable, so every series has been touched).
A missing binary FAILS the test."""

import json
import os
import re
import socket
import time
import urllib.request

import podium_testlib as lib

# PromQL words that look like metric names but are not.
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
            "unless", "offset", "inf", "nan"}

GROUPING = r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)"


def dashboard_path():
    return os.path.join(lib.Flags.repo, "deploy", "grafana", "podium-dashboard.json")


def load_dashboard():
    with open(dashboard_path()) as f:
        return json.load(f)


def all_panels(dash):
    for p in dash.get("panels", []):
        yield p
        yield from p.get("panels", [])  # Panels inside collapsed rows.


def queries(dash):
    """(where, PromQL expression) for every target and query variable."""
    for p in all_panels(dash):
        for t in p.get("targets", []):
            yield f"panel {p.get('title')!r} target {t.get('refId')}", t["expr"]
    for v in dash.get("templating", {}).get("list", []):
        if v.get("type") == "query":
            q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            yield f"variable ${v['name']}", q


def selectors(expr):
    """[(metric, [(label, op, value)])] of a PromQL expression, plus the labels
    named in by (...) / without (...) and label_values(metric, label)."""
    grouping = [l.strip() for g in re.findall(GROUPING, expr)
                for l in g.split(",") if l.strip()]
    lv = re.fullmatch(r"\s*label_values\(\s*([A-Za-z_:][\w:]*)\s*,\s*(\w+)\s*\)\s*", expr)
    if lv:
        return [(lv.group(1), [])], [lv.group(2)]
    s = re.sub(r"\[[^\]]*\]", "", expr)                      # range selectors
    s = re.sub(GROUPING, "", s)                               # grouping, vector matching
    found = []
    for m in re.finditer(r"([A-Za-z_:][\w:]*)\s*(\{[^}]*\})?(\s*\()?", s):
        name, braces, call = m.group(1), m.group(2), m.group(3)
        if call or name.lower() in KEYWORDS:
            continue
        if m.start() > 0 and (s[m.start() - 1].isdigit() or s[m.start() - 1] == "."):
            continue  # the exponent of a number such as 1e3
        matchers = re.findall(r'(\w+)\s*(=~|!~|!=|=)\s*"([^"]*)"', braces or "")
        found.append((name, matchers))
    return found, grouping


# Histograms with no series until their first observation, which the run may
# not produce (a queueing hint is asked only when a cluster event meets a pod
# in the pool whose rejecting plugin has a hint for it), and /metrics leaves
# a family without series out entirely. For these the name must be one
# podium-scheduler registers (it is in the binary; metrics_test.cc checks its
# type, labels and buckets), and a query may use only kube-scheduler's labels.
EXPORTED_ONCE_OBSERVED = {
    "scheduler_queueing_hint_execution_duration_seconds": {"plugin", "event", "hint"},
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse_exposition(text):
    """{metric name: [label dict per series]} of the Prometheus text format; the
    sample's value is under "__value__" (not a valid label name)."""
    series = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"([A-Za-z_:][\w:]*)(\{(.*)\})?\s+(\S+)", line)
        if not m:
            continue
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        labels["__value__"] = m.group(4)
        series.setdefault(m.group(1), []).append(labels)
    return series


class SelectorParserTest(lib.IntegrationTest):
    """The query parser the dashboard check relies on."""

    def test_selectors_of_a_quantile_query(self):
        found, grouping = selectors(
            'histogram_quantile(0.99, sum by (le, result) (rate(x_bucket{profile=~"$profile",a="b"}[5m]))) '
            '/ ignoring(le) sum(rate(y_total[1e3s])) > 1e3')
        self.assertEqual(found, [("x_bucket", [("profile", "=~", "$profile"), ("a", "=", "b")]),
                                 ("y_total", [])])
        self.assertEqual(grouping, ["le", "result", "le"])
        self.assertEqual(selectors("label_values(m_total, profile)"), ([("m_total", [])], ["profile"]))


class GrafanaDashboardTest(lib.IntegrationTest):

    def test_dashboard_is_well_formed(self):
        dash = load_dashboard()
        self.assertTrue(dash.get("title") and dash.get("uid"))
        ids = [p["id"] for p in all_panels(dash)]
        self.assertEqual(len(ids), len(set(ids)), "panel ids must be unique")
        for p in all_panels(dash):
            g = p["gridPos"]
            self.assertLessEqual(g["x"] + g["w"], 24, p["title"])
            if p["type"] == "row":
                continue
            self.assertEqual(p["datasource"], {"type": "prometheus", "uid": "${datasource}"}, p["title"])
            refs = [t["refId"] for t in p["targets"]]
            self.assertTrue(refs, f"panel {p['title']!r} has no query")
            self.assertEqual(len(refs), len(set(refs)), p["title"])
        titles = " ".join(p["title"].lower() for p in all_panels(dash))
        for topic in ("throughput", "latency", "queue", "plugin"):
            self.assertIn(topic, titles)
        for where, expr in queries(dash):
            found, _ = selectors(expr)
            self.assertTrue(found, f"{where}: no metric in {expr!r}")

    def test_every_query_names_an_exported_metric(self):
        for flag in ("sim", "scheduler", "plugin_host"):
            path = getattr(lib.Flags, flag)
            if not path or not os.path.exists(path):
                self.fail(f"--{flag.replace('_', '-')} binary missing: {path!r}")
        metrics = self.scrape_after_a_run()

        checked = 0
        for where, expr in queries(load_dashboard()):
            found, grouping = selectors(expr)
            label_names = {"le"} if any(n.endswith("_bucket") for n, _ in found) else set()
            for name, matchers in found:
                family = re.sub(r"_(bucket|sum|count)$", "", name)
                if name not in metrics and family in EXPORTED_ONCE_OBSERVED:
                    with open(lib.Flags.scheduler, "rb") as f:
                        self.assertIn(family.encode(), f.read(),
                                      f"{where}: podium-scheduler registers no {family}")
                    label_names |= EXPORTED_ONCE_OBSERVED[family]
                    for label, _, _ in matchers:
                        self.assertIn(label, EXPORTED_ONCE_OBSERVED[family], f"{where}: {name} has no label {label!r}")
                    checked += 1
                    continue
                self.assertTrue(name in metrics, f"{where}: {name} is not exported by podium-scheduler "
                                                 f"(exported: {sorted(metrics)})")
                series = metrics[name]
                names = set().union(*(s.keys() for s in series)) - {"__value__"}
                label_names |= names
                for label, op, value in matchers:
                    self.assertIn(label, names, f"{where}: {name} has no label {label!r}")
                    if "$" in value or op.startswith("!"):
                        continue
                    values = {s.get(label) for s in series}
                    wanted = value.split("|") if op == "=~" else [value]
                    for v in wanted:
                        self.assertIn(v, values, f"{where}: no series {name}{{{label}={v!r}}} (have {values})")
                checked += 1
            for label in grouping:
                self.assertIn(label, label_names, f"{where}: grouping label {label!r} is on none of its metrics")
        self.assertGreater(checked, 10)

    def test_kube_scheduler_metrics_after_a_run(self):
        """kube-scheduler's names and label sets, each with a plausible value,
        on the /metrics of a scheduler that placed podiumctl.yaml (2 pods bound
        on 3 nodes, default/giant rejected by NodeResourcesFit and TaintToleration)."""
        metrics = self.scrape_after_a_run()
        deadline = time.monotonic() + 20

        def settled(metrics):
            # The pool and cache gauges are sampled once a second: wait for a
            # sample taken after giant failed and both binds were observed
            # (an assumed pod left over would never get there).
            def value(name, **labels):
                return [float(s["__value__"]) for s in metrics.get(name, [])
                        if all(s.get(k) == v for k, v in labels.items())]
            return (any(v >= 1 for v in value("scheduler_unschedulable_pods", plugin="TaintToleration"))
                    and value("scheduler_cache_size", type="assumed_pods") == [0]
                    and value("scheduler_cache_size", type="pods") == [2])
        while not settled(metrics):
            self.assertLess(time.monotonic(), deadline,
                            "the gauges never showed giant unschedulable and 2 pods bound, none assumed: "
                            f"{metrics.get('scheduler_unschedulable_pods')} {metrics.get('scheduler_cache_size')}")
            time.sleep(0.3)
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as r:
                metrics = parse_exposition(r.read().decode())

        def series(name, **labels):
            found = [s for s in metrics.get(name, []) if all(s.get(k) == v for k, v in labels.items())]
            self.assertTrue(found, f"no series {name}{labels}; have {metrics.get(name)}")
            return found

        want_labels = {
            "scheduler_schedule_attempts_total": {"result", "profile"},
            "scheduler_scheduling_attempt_duration_seconds_count": {"result", "profile"},
            "scheduler_scheduling_algorithm_duration_seconds_count": set(),
            "scheduler_pending_pods": {"queue"},
            "scheduler_pod_scheduling_attempts_count": set(),
            "scheduler_pod_scheduling_sli_duration_seconds_count": {"attempts"},
            "scheduler_framework_extension_point_duration_seconds_count": {"extension_point", "status", "profile"},
            "scheduler_unschedulable_pods": {"plugin", "profile"},
            "scheduler_cache_size": {"type"},
            "scheduler_queue_incoming_pods_total": {"queue", "event"},
            "scheduler_plugin_execution_duration_seconds_count": {"plugin", "extension_point", "status"},
            "scheduler_preemption_attempts_total": set(),
            "scheduler_preemption_victims_count": set(),
            "scheduler_permit_wait_duration_seconds_count": {"result"},
            "scheduler_event_handling_duration_seconds_count": {"event"},
            "podium_plugin_endpoint_request_duration_seconds_count": {"endpoint", "request"},
            "podium_plugin_failure_policy_total": {"endpoint", "policy"},
        }
        for name, labels in want_labels.items():
            for s in series(name):
                self.assertEqual({k for k in s if k != "__value__"}, labels, f"{name}: labels {s}")
        scheduled = series("scheduler_schedule_attempts_total", result="scheduled", profile="default-scheduler")
        self.assertEqual(float(scheduled[0]["__value__"]), 2)
        self.assertGreaterEqual(float(series("scheduler_schedule_attempts_total", result="unschedulable")[0]["__value__"]), 1)
        self.assertEqual(float(series("scheduler_pod_scheduling_attempts_count")[0]["__value__"]), 2)
        self.assertEqual({s["queue"] for s in series("scheduler_pending_pods")},
                         {"active", "backoff", "unschedulable", "gated"})
        self.assertEqual(float(series("scheduler_pending_pods", queue="unschedulable")[0]["__value__"]), 1)
        for plugin in ("NodeResourcesFit", "TaintToleration"):
            self.assertEqual(float(series("scheduler_unschedulable_pods", plugin=plugin,
                                          profile="default-scheduler")[0]["__value__"]), 1)
        self.assertEqual(float(series("scheduler_cache_size", type="nodes")[0]["__value__"]), 3)
        self.assertEqual(float(series("scheduler_cache_size", type="pods")[0]["__value__"]), 2)
        self.assertEqual(float(series("scheduler_cache_size", type="assumed_pods")[0]["__value__"]), 0)
        self.assertGreater(float(series("scheduler_framework_extension_point_duration_seconds_count",
                                        extension_point="Filter")[0]["__value__"]), 0)
        # Three pending pods came in; giant's failed attempt took it to the pool.
        self.assertEqual(float(series("scheduler_queue_incoming_pods_total", queue="active",
                                      event="PodAdd")[0]["__value__"]), 3)
        self.assertGreaterEqual(float(series("scheduler_queue_incoming_pods_total", queue="unschedulable",
                                             event="ScheduleAttemptFailure")[0]["__value__"]), 1)
        # The plugin host runs several Filter plugins in one phase: its time is labelled by endpoint.
        filter_runs = series("scheduler_plugin_execution_duration_seconds_count", plugin="endpoint/host",
                             extension_point="Filter")
        self.assertGreaterEqual(sum(float(s["__value__"]) for s in filter_runs), 3)
        # giant was unschedulable: DefaultPreemption ran, and found no victims worth taking.
        self.assertGreaterEqual(float(series("scheduler_preemption_attempts_total")[0]["__value__"]), 1)
        self.assertEqual(float(series("scheduler_preemption_victims_count")[0]["__value__"]), 0)
        self.assertGreaterEqual(float(series("podium_plugin_endpoint_request_duration_seconds_count",
                                             endpoint="host", request="cycle")[0]["__value__"]), 3)
        # No Permit plugin waits in this profile: both results exported at 0.
        for result in ("Success", "Unschedulable"):
            self.assertEqual(float(series("scheduler_permit_wait_duration_seconds_count",
                                          result=result)[0]["__value__"]), 0)
        # The adapter listed 3 nodes and 3 pending pods, each handled once as an Add.
        for event in ("NodeAdd", "UnscheduledPodAdd"):
            self.assertEqual(float(series("scheduler_event_handling_duration_seconds_count",
                                          event=event)[0]["__value__"]), 3)
        for policy in ("Ignore", "Fail"):
            self.assertEqual(float(series("podium_plugin_failure_policy_total", endpoint="host",
                                          policy=policy)[0]["__value__"]), 0)

    def scrape_after_a_run(self):
        host_addr = f"unix://{self.path('host.sock')}"
        host = lib.Process([lib.Flags.plugin_host, "--listen", host_addr], self.dir, "podium-plugin-host")
        self.processes.append(host)
        host.wait_for_stderr(r"listening on")
        port = free_port()
        self.metrics_port = port
        addr = f"unix://{self.path('scheduler.sock')}"
        sched = lib.Process([lib.Flags.scheduler, "--listen", addr, "--metrics-address", f"127.0.0.1:{port}",
                             "--plugin-endpoint", f"host={host_addr}"], self.dir, "podium-scheduler")
        self.processes.append(sched)
        sched.wait_for_stderr(r"podium-scheduler listening on", timeout=40)
        self.assertNotIn("metrics disabled", sched.stderr())
        rc, out, err = self.run_sim(os.path.join(lib.Flags.repo, "integration", "clusters", "podiumctl.yaml"),
                                    scheduler=addr)
        self.assertEqual(rc, 0, err[-3000:])
        report = lib.parse_report(out)
        self.assertEqual(report.unschedulable(), ["default/giant"], report.raw)
        # The housekeeping pass sets the queue and plugin gauges; wait for the
        # pool to show giant (bounded), so the scrape reflects the run.
        deadline = time.monotonic() + 20
        while True:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                metrics = parse_exposition(r.read().decode())
            pending = {s.get("queue"): s for s in metrics.get("scheduler_pending_pods", [])}
            requests = [s for s in metrics.get("podium_plugin_endpoint_events", []) if s.get("kind") == "requests"]
            if pending and requests:
                return metrics
            self.assertLess(time.monotonic(), deadline, f"/metrics never showed the queue gauges: {sorted(metrics)}")
            time.sleep(0.2)


if __name__ == "__main__":
    lib.main()
