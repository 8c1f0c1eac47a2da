#!/usr/bin/python3
"""make bench through podium-k8s-adapter: scheduler_perf's basic shapes served
by the fake kube-apiserver over HTTP (rate limit off), placed by
podium-scheduler + podium-plugin-host.

  bench_adapter.py --build BUILD --workload basic-500 > result.json

The result has the core fields of podium-sim's report (workload, nodes, pods,
seconds, pods_per_second) plus api_requests_per_pod: the API calls besides
events made per measured pod (list, watch, bind, patch, get, delete), and
cpu_ms_per_pod: each process's CPU time (user + system) during the measured
phase divided by the measured pods, which says where the time goes even on a
loaded machine, and double_binds (pods bound more than once: must be 0).

The API is served by podium-bench-apiserver (integration/fake_apiserver/
bench_apiserver.cc, C++, one thread per connection) by default; --apiserver
python uses fake_apiserver.py, the end-to-end tests' server, whose single
interpreter caps near 1 700 pods/s and bounds the numbers.
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
# nodes, init pods, measured pods; "smoke" is the test of the bench itself.
SHAPES = {"basic-500": (500, 500, 1000), "basic-5000": (5000, 1000, 10000), "smoke": (20, 20, 200)}
# Issue 8's start-up shape: nodes, pods already running on them, pending pods
# (100 000 pods in all), every object in the API before Podium starts.
# Measured: time from starting the three processes (plugin host, scheduler,
# adapter, as the sidecar set starts them) to the first bind.
STARTUP_SHAPES = {"startup-5000": (5000, 95000, 5000), "startup-smoke": (20, 200, 20)}


def node(i):
    res = {"cpu": "4", "memory": "32Gi", "pods": "110"}
    name = f"scheduler-perf-node-{i}"
    return {"kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"capacity": res, "allocatable": res}}


def pod(ns, name, node_name=None):
    p = {"kind": "Pod", "metadata": {"name": name, "namespace": ns},
         "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.9",
                                  "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}]}}
    if node_name is not None:
        p["spec"]["nodeName"] = node_name
        p["status"] = {"phase": "Running"}
    return p


class Bench:
    def __init__(self, build, workdir, apiserver="cpp", adapter_flags=()):
        self.build = build
        self.apiserver = apiserver
        self.adapter_flags = list(adapter_flags)
        self.dir = workdir
        self.procs = []
        self.names = {}  # pid -> process name

    def cpu_seconds(self):
        """{process name: user + system CPU seconds so far}."""
        tick = os.sysconf("SC_CLK_TCK")
        out = {}
        for p, _ in self.procs:
            try:
                with open(f"/proc/{p.pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                out[self.names[p.pid]] = (int(fields[11]) + int(fields[12])) / tick
            except OSError:
                pass
        return out

    def context_switches(self):
        """{process name: voluntary + involuntary context switches so far, summed over its live threads}."""
        out = {}
        for p, _ in self.procs:
            total = 0
            try:
                for tid in os.listdir(f"/proc/{p.pid}/task"):
                    try:
                        with open(f"/proc/{p.pid}/task/{tid}/status") as f:
                            for line in f:
                                if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                                    total += int(line.split()[1])
                    except OSError:
                        pass  # The thread ended meanwhile.
            except OSError:
                continue
            out[self.names[p.pid]] = total
        return out

    def spawn(self, name, argv, ready):
        err = open(os.path.join(self.dir, f"{name}.stderr"), "wb+")
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
        self.procs.append((p, err))
        self.names[p.pid] = name
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            err.seek(0)
            m = re.search(ready, err.read().decode(errors="replace"))
            if m:
                return m
            if p.poll() is not None:
                break
            time.sleep(0.05)
        err.seek(0)
        raise RuntimeError(f"{name} did not start:\n{err.read().decode(errors='replace')[-3000:]}")

    def stop(self):
        for p, err in reversed(self.procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
            err.close()

    def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as r:
            return json.loads(r.read())

    def wait_bound(self, want, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            s = self.call("GET", "/control/stats?brief=1")
            if s["bound"] >= want:
                return s
            time.sleep(0.05)
        raise RuntimeError(f"only {s['bound']} of {want} pods bound within {timeout}s")

    def run(self, workload, timeout):
        nodes, init_pods, measured = SHAPES[workload]
        if self.apiserver == "cpp":
            server = [f"{self.build}/integration/podium-bench-apiserver", "--port", "0"]
        else:
            server = [sys.executable, os.path.join(HERE, "fake_apiserver.py"), "--port", "0"]
        m = self.spawn("fake-apiserver", server, r"listening on ([\d.]+):(\d+)")
        self.url = f"http://{m.group(1)}:{m.group(2)}"
        self.call("POST", "/control/objects", {"objects": [node(i) for i in range(nodes)] +
                                               [pod("sched-setup", f"pod-init-{i}") for i in range(init_pods)]})
        self.start_podium()
        self.wait_bound(init_pods, timeout)
        return self.measure(init_pods, measured, nodes, workload, timeout)

    def start_podium(self):
        """Plugin host, scheduler and adapter, as the sidecar set runs them; returns once each logged ready."""
        host = f"unix://{self.dir}/host.sock"
        self.spawn("plugin-host", [f"{self.build}/plugin-host/podium-plugin-host", "--listen", host], r"listening on")
        sched = f"unix://{self.dir}/scheduler.sock"
        self.spawn("scheduler", [f"{self.build}/services/scheduler/podium-scheduler", "--config",
                                 f"{REPO}/deploy/config/scheduler.yaml", "--listen", sched, "--metrics-address=",
                                 "--plugin-endpoint", f"host={host}",
                                 # As deploy/kubernetes/deployment.yaml runs it (binds wait on the API server).
                                 "--max-binds-in-flight=0"], r"listening on")
        kubeconfig = os.path.join(self.dir, "kubeconfig")
        with open(kubeconfig, "w") as f:
            f.write(f"current-context: f\nclusters:\n- name: f\n  cluster: {{server: \"{self.url}\"}}\n"
                    "contexts:\n- name: f\n  context: {cluster: f}\n")
        self.spawn("adapter", [f"{self.build}/adapters/kubernetes/podium-k8s-adapter", "--kubeconfig", kubeconfig,
                               "--scheduler", sched, "--kube-api-qps", "0"] + self.adapter_flags, r"API server")

    def run_startup(self, workload, timeout):
        nodes, running, pending = STARTUP_SHAPES[workload]
        server = [f"{self.build}/integration/podium-bench-apiserver", "--port", "0"]
        m = self.spawn("fake-apiserver", server, r"listening on ([\d.]+):(\d+)")
        self.url = f"http://{m.group(1)}:{m.group(2)}"
        self.call("POST", "/control/objects", {"objects": [node(i) for i in range(nodes)]})
        for i in range(0, running, 5000):
            self.call("POST", "/control/objects", {"objects": [
                pod("sched-running", f"pod-running-{j}", f"scheduler-perf-node-{j % nodes}")
                for j in range(i, min(running, i + 5000))]})
        self.call("POST", "/control/objects", {"objects": [pod("sched-test", f"pod-{i}") for i in range(pending)]})
        start = time.monotonic()
        self.start_podium()
        ready = time.monotonic()
        self.wait_bound(1, timeout)
        first = time.monotonic()
        self.wait_bound(pending, timeout)
        done = time.monotonic()
        stats = self.call("GET", "/control/stats")
        return {"workload": f"adapter-{workload}", "nodes": nodes, "running_pods": running,
                "pending_pods": pending, "pods": pending, "measured_pods": pending,
                "seconds": round(done - ready, 3), "pods_per_second": round(pending / (done - ready), 1),
                "seconds_to_first_bind": round(first - start, 3),
                "seconds_to_processes_ready": round(ready - start, 3),
                "seconds_to_all_bound": round(done - start, 3),
                "double_binds": stats.get("double_binds", 0), "requests": stats["requests"]}

    def measure(self, init_pods, measured, nodes, workload, timeout):
        before = self.call("GET", "/control/stats?brief=1")["requests"]
        cpu_before = self.cpu_seconds()
        switches_before = self.context_switches()
        objects = [pod("sched-test", f"pod-{i}") for i in range(measured)]
        start = time.monotonic()
        for i in range(0, measured, 1000):
            self.call("POST", "/control/objects", {"objects": objects[i:i + 1000]})
        after = self.wait_bound(init_pods + measured, timeout)
        seconds = time.monotonic() - start
        cpu_after = self.cpu_seconds()
        switches_after = self.context_switches()
        calls = sum(n - before.get(k, 0) for k, n in after["requests"].items()
                    if not k.endswith(" event") and not k.endswith(" event_patch"))
        stats = self.call("GET", "/control/stats")
        double_binds = stats["double_binds"] if "double_binds" in stats else \
            sum(1 for n in stats.get("binds", {}).values() if n > 1)
        return {"workload": f"adapter-{workload}", "apiserver": self.apiserver, "double_binds": double_binds, "nodes": nodes, "pods": measured, "measured_pods": measured,
                "seconds": round(seconds, 3), "pods_per_second": round(measured / seconds, 1),
                "api_requests_per_pod": round(calls / measured, 2),
                "cpu_ms_per_pod": {k: round(1000 * (v - cpu_before.get(k, 0)) / measured, 3)
                                   for k, v in cpu_after.items()},
                # Threads' context switches per pod (threads that ended during the
                # measured phase are not counted).
                "context_switches_per_pod": {k: round((v - switches_before.get(k, 0)) / measured, 2)
                                             for k, v in switches_after.items()},
                "requests": {k: n - before.get(k, 0) for k, n in after["requests"].items()}}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", required=True)
    p.add_argument("--workload", default="basic-500", choices=sorted(SHAPES) + sorted(STARTUP_SHAPES))
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--apiserver", default="cpp", choices=["cpp", "python"])
    p.add_argument("--adapter-flag", action="append", default=[],
                   help="one more flag for podium-k8s-adapter, e.g. --adapter-flag=--cpu-policy=normal (repeatable)")
    args = p.parse_args()
    workdir = tempfile.mkdtemp(prefix="podium-bench-")
    bench = Bench(os.path.abspath(args.build), workdir, args.apiserver, args.adapter_flag)
    try:
        run = bench.run_startup if args.workload in STARTUP_SHAPES else bench.run
        print(json.dumps(run(args.workload, args.timeout)))
    finally:
        bench.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
