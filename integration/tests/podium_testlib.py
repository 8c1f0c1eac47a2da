"""Shared pieces of the integration tests: flags from CMake, child processes that are
always killed, cluster YAML, and the one place that parses podium-sim's report.

Every test script is run by ctest as
  /usr/bin/python3 test_x.py --repo SRC --stubs BUILD/python [--sim BIN]
                             [--scheduler BIN] [--plugin-host BIN]
and the unittest flags (if any) follow after `--`.
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
import textwrap
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = "/usr/bin/python3"  # The python3 first on PATH may lack grpc.


class Flags:
    repo = os.path.dirname(os.path.dirname(HERE))
    stubs = None
    sim = None
    scheduler = None
    plugin_host = None


def take_flag(name):
    """Takes `name VALUE` (a test file's own flag) off sys.argv before main()
    parses the rest; returns VALUE, or None when the flag is not there."""
    argv = sys.argv[1:]
    if name not in argv:
        return None
    i = argv.index(name)
    value = argv[i + 1]
    del argv[i:i + 2]
    sys.argv = [sys.argv[0]] + argv
    return value


def main():
    """unittest.main after taking our own flags off the command line."""
    p = argparse.ArgumentParser()
    p.add_argument("--repo", default=Flags.repo)
    p.add_argument("--stubs", default=None)
    p.add_argument("--sim", default=None)
    p.add_argument("--scheduler", default=None)
    p.add_argument("--plugin-host", dest="plugin_host", default=None)
    ours, rest = p.parse_known_args(sys.argv[1:])
    for k, v in vars(ours).items():
        setattr(Flags, k, v)
    if Flags.stubs:
        sys.path.insert(0, Flags.stubs)
    rest = [a for a in rest if a != "--"]
    program = unittest.main(argv=[sys.argv[0]] + rest, verbosity=2, exit=False)
    result = program.result
    # ctest counts a skip as a pass: a skipped test fails the run instead.
    if result.skipped:
        print(f"FAILED: {len(result.skipped)} test(s) skipped", file=sys.stderr)
    sys.exit(0 if result.wasSuccessful() and not result.skipped else 1)


# Linux scheduling policies, as /proc/PID/task/TID/stat's field 41 reports them.
SCHED_OTHER = 0
SCHED_BATCH = 3


def thread_policies(pid):
    """{tid: policy} of every thread of `pid` (field 41 of /proc/PID/task/TID/stat)."""
    policies = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except FileNotFoundError:
            continue  # The thread ended meanwhile.
        # The command name (field 2) may hold spaces: fields after its ')'.
        fields = stat[stat.rindex(")") + 2:].split()
        policies[int(tid)] = int(fields[41 - 3])
    return policies

def plugin_script():
    return os.path.join(Flags.repo, "integration", "python_plugin", "zone_plugin.py")


def config_path(name):
    return os.path.join(Flags.repo, "integration", "config", name)


def require_binaries(test, *names):
    """Fails (never skips: ctest counts a skip as a pass) when a binary the test
    needs was not given or does not exist."""
    for name in names:
        path = getattr(Flags, name)
        if not path or not os.path.exists(path):
            test.fail(f"--{name.replace('_', '-')} binary {path or '(not given)'} does not exist: build it first")


def require_files(test, *paths):
    """Fails when a file the test reads is missing."""
    for path in paths:
        if not os.path.exists(path):
            test.fail(f"{path} does not exist")


# -- processes ---------------------------------------------------------------

class Process:
    """A child process whose stderr is captured to a file (and, optionally, watched
    for a line). Always killed by stop(), which tests call in tearDown/finally."""

    def __init__(self, argv, workdir, name, env=None):
        self.argv = argv
        self.name = name
        self.stderr_path = os.path.join(workdir, f"{name}.stderr")
        self.stdout_path = os.path.join(workdir, f"{name}.stdout")
        self._err = open(self.stderr_path, "wb")
        self._out = open(self.stdout_path, "wb")
        self.proc = subprocess.Popen(argv, stdout=self._out, stderr=self._err,
                                     stdin=subprocess.DEVNULL, env=env,
                                     start_new_session=True)

    def stderr(self):
        with open(self.stderr_path, "rb") as f:
            return f.read().decode(errors="replace")

    def stdout(self):
        with open(self.stdout_path, "rb") as f:
            return f.read().decode(errors="replace")

    def wait_for_stderr(self, pattern, timeout=15):
        deadline = time.monotonic() + timeout
        rx = re.compile(pattern)
        while time.monotonic() < deadline:
            m = rx.search(self.stderr())
            if m:
                return m
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited with {self.proc.returncode} before "
                                     f"printing /{pattern}/:\n{self.stderr()}")
            time.sleep(0.05)
        raise AssertionError(f"{self.name} did not print /{pattern}/ within {timeout}s:\n"
                             f"{self.stderr()}")

    def alive(self):
        return self.proc.poll() is None

    def wait(self, timeout):
        return self.proc.wait(timeout=timeout)

    def stop(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                # podium-sim stops its spawned children (their own process
                # group) before it exits: give it the time, or they leak.
                self.proc.wait(timeout=20)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=5)
        self._err.close()
        self._out.close()


class IntegrationTest(unittest.TestCase):
    """A temp dir (short path: unix sockets are limited to 108 bytes) and a list of
    processes killed in tearDown."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="podium-it-")
        self.processes = []

    def tearDown(self):
        for p in reversed(self.processes):
            p.stop()
        if self._failed() or os.environ.get("PODIUM_KEEP_TMP"):
            self._dump_logs()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _failed(self):
        """Whether the test body has failed so far (Python 3.11's unittest records
        failures on the result before tearDown runs)."""
        result = getattr(getattr(self, "_outcome", None), "result", None)
        if result is None:
            return True
        return any(t is self for t, _ in result.failures + result.errors)

    def _dump_logs(self):
        for p in self.processes:
            try:
                print(f"\n----- {p.name} stderr ({' '.join(p.argv)}) -----\n{p.stderr()[-6000:]}",
                      file=sys.stderr)
            except OSError:
                pass

    def path(self, name):
        return os.path.join(self.dir, name)

    def write(self, name, text):
        with open(self.path(name), "w") as f:
            f.write(text)
        return self.path(name)

    def start_plugin(self, name="python", misbehave=None):
        """Starts the Python plugin on a unix socket in the temp dir; returns its
        address (unix:///...)."""
        sock = self.path(f"{name}.sock")
        argv = [PYTHON, plugin_script(), "--listen", f"unix://{sock}"]
        if Flags.stubs:
            argv += ["--stubs", Flags.stubs]
        if misbehave:
            argv += [f"--misbehave={misbehave}"]
        p = Process(argv, self.dir, f"plugin-{name}")
        self.processes.append(p)
        p.wait_for_stderr(r"python-plugin listening on ")
        self.plugin_process = p
        return f"unix://{sock}"

    def config_variant(self, name, failure_policy=None, timeout=None):
        """A copy of integration/config/NAME in the temp dir with the python
        endpoint's failurePolicy and/or timeout replaced."""
        with open(config_path(name)) as f:
            text = f.read()
        if failure_policy:
            text, n = re.subn(r"^(\s+)failurePolicy: \w+", rf"\1failurePolicy: {failure_policy}",
                              text, flags=re.M)
            assert n == 1, f"{name} has no failurePolicy line"
        if timeout:
            text, n = re.subn(r"^(\s+)timeout: \S+", rf"\1timeout: {timeout}", text, flags=re.M)
            assert n == 1, f"{name} has no timeout line"
        suffix = f"{failure_policy or ''}{timeout or ''}"
        return self.write(f"{os.path.splitext(name)[0]}-{suffix}.yaml", text)

    def start_scheduler(self, config, endpoints=(), flags=()):
        """podium-plugin-host and podium-scheduler run by the test itself (rather
        than spawned by podium-sim), so the test can read the scheduler's log and
        ask it questions after a run. Returns the scheduler's address; the
        processes are self.host_process and self.scheduler_process. `config`
        None: the scheduler's default profile; `flags` go to both processes."""
        require_binaries(self, "scheduler", "plugin_host")
        host_addr = f"unix://{self.path('host.sock')}"
        host = Process([Flags.plugin_host, "--listen", host_addr] + list(flags), self.dir, "podium-plugin-host")
        self.processes.append(host)
        host.wait_for_stderr(r"listening on")
        self.host_process = host
        addr = f"unix://{self.path('scheduler.sock')}"
        argv = [Flags.scheduler] + (["--config", config] if config else []) + [
            "--listen", addr, "--metrics-address=", "--plugin-endpoint", f"host={host_addr}"] + list(flags)
        for name, a in endpoints:
            argv += ["--plugin-endpoint", f"{name}={a}"]
        self.scheduler_process = Process(argv, self.dir, "podium-scheduler")
        self.processes.append(self.scheduler_process)
        self.scheduler_process.wait_for_stderr(r"podium-scheduler listening on", timeout=40)
        return addr

    def list_plugins(self, scheduler_addr):
        """Admin.ListPlugins: {endpoint name: PluginEndpointInfo}. Raises when the
        scheduler does not answer within 5 s."""
        import grpc
        from podium.v1 import admin_pb2, admin_pb2_grpc
        with grpc.insecure_channel(scheduler_addr) as channel:
            stub = admin_pb2_grpc.AdminStub(channel)
            resp = stub.ListPlugins(admin_pb2.ListPluginsRequest(), timeout=5)
        # The endpoint is named "python" or "python (unix:///...)".
        return {e.endpoint.split(" ")[0]: e for e in resp.endpoints}

    def run_sim(self, cluster, config=None, endpoints=(), output="json", extra=(),
                sim_timeout="40s", timeout=60, scheduler=None):
        """podium-sim --spawn ... (or --scheduler ADDR: a scheduler the test
        started); returns (returncode, stdout, stderr). The sim gives up after
        sim_timeout (exit 3, a report with outcome "timeout"); the test after
        `timeout` seconds."""
        require_binaries(self, "sim")
        argv = [Flags.sim, "--cluster", cluster, "--timeout", sim_timeout]
        if scheduler:
            argv += ["--scheduler", scheduler]
        else:
            argv += ["--spawn"]
            if Flags.scheduler:
                argv += ["--scheduler-bin", Flags.scheduler]
            if Flags.plugin_host:
                argv += ["--plugin-host-bin", Flags.plugin_host]
            if config:
                argv += ["--config", config]
            for name, addr in endpoints:
                argv += ["--plugin-endpoint", f"{name}={addr}"]
        if output:
            argv += ["--output", output]
        argv += list(extra)
        p = Process(argv, self.dir, "podium-sim")
        self.processes.append(p)
        try:
            rc = p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.stop()
            self.fail(f"podium-sim did not finish within {timeout}s:\n{p.stderr()[-4000:]}")
        return rc, p.stdout(), p.stderr()


# -- cluster YAML ------------------------------------------------------------

class ScenarioTest(IntegrationTest):
    """A podium-sim scenario: the cluster's YAML documents placed with the default
    plugins (podium-sim --spawn), the report parsed. A missing binary fails."""

    def setUp(self):
        super().setUp()
        require_binaries(self, "sim", "scheduler", "plugin_host")

    def place(self, *docs):
        cluster = self.write("cluster.yaml", cluster_yaml(*docs))
        rc, out, err = self.run_sim(cluster, config=config_path("default-plugins.yaml"))
        self.assertEqual(rc, 0, f"podium-sim failed:\n{err[-4000:]}")
        report = parse_report(out)
        self.assertEqual(report.outcome, "completed", out[-4000:])
        return report


def node_yaml(name, zone=None, cpu="4", memory="8Gi", pods=110, labels=None):
    labels = dict(labels or {})
    labels.setdefault("kubernetes.io/hostname", name)
    if zone:
        labels["topology.kubernetes.io/zone"] = zone
    label_lines = "".join(f"      {k}: {json.dumps(v)}\n" for k, v in sorted(labels.items()))
    return (
        "apiVersion: v1\n"
        "kind: Node\n"
        "metadata:\n"
        f"  name: {name}\n"
        "  labels:\n"
        f"{label_lines}"
        "status:\n"
        "  capacity:\n"
        f"    cpu: \"{cpu}\"\n"
        f"    memory: {memory}\n"
        f"    pods: \"{pods}\"\n"
        "  allocatable:\n"
        f"    cpu: \"{cpu}\"\n"
        f"    memory: {memory}\n"
        f"    pods: \"{pods}\"\n")


def pod_yaml(name, cpu="100m", memory="128Mi", namespace="default", annotations=None,
             node_name=None):
    ann = ""
    if annotations:
        ann = "  annotations:\n" + "".join(
            f"    {k}: {json.dumps(v)}\n" for k, v in sorted(annotations.items()))
    node = f"  nodeName: {node_name}\n" if node_name else ""
    return (
        "apiVersion: v1\n"
        "kind: Pod\n"
        "metadata:\n"
        f"  name: {name}\n"
        f"  namespace: {namespace}\n"
        f"{ann}"
        "spec:\n"
        f"{node}"
        "  containers:\n"
        "  - name: main\n"
        "    image: registry.k8s.io/pause:3.9\n"
        "    resources:\n"
        "      requests:\n"
        f"        cpu: \"{cpu}\"\n"
        f"        memory: {memory}\n"
        "status:\n"
        f"  phase: {'Running' if node_name else 'Pending'}\n")


def sp_group(name, min_member, namespace="default"):
    """A PodGroup of scheduler-plugins' Coscheduling API (scheduling.x-k8s.io)."""
    return textwrap.dedent(f"""\
        apiVersion: scheduling.x-k8s.io/v1alpha1
        kind: PodGroup
        metadata: {{name: {name}, namespace: {namespace}}}
        spec: {{minMember: {min_member}}}
        """)


def cluster_yaml(*docs):
    return "---\n".join(docs)


# -- the report ----------------------------------------------------------------

class Report:
    """podium-sim --output json, reduced to what the tests assert on. The only code
    that knows the report's shape (adapters/simulator/sim/report.cc): fix it here
    when the shape changes.

      {"outcome": "completed"|"timeout"|..., "nodes": N, "pods": N, "bound": N,
       "placements": [{"namespace", "name", "node"}],
       "unschedulable_pods": [{"namespace", "name", "message", "nominated_node"}],
       "error_pods": [{"namespace", "name", "message"}],
       "pending_pods": ["ns/name"], "deleted_pods": ["ns/name: reason"], ...}

    placements: {"ns/name": node, or None when not bound};
    messages: {"ns/name": FailedScheduling message}, for unschedulable pods and
    pods whose attempt failed with an error;
    errors: the "ns/name" of the latter (outcome "scheduling_errors", exit 4);
    nominations: {"ns/name": status.nominatedNodeName} of unschedulable pods
    that have one.
    """

    def __init__(self, raw):
        self.raw = raw
        self.outcome = raw.get("outcome")
        self.placements = {}
        self.messages = {}
        self.pending = set()
        self.errors = set()
        self.nominations = {}
        for p in raw.get("placements") or []:
            self.placements[self._key(p)] = p.get("node") or None
        for p in raw.get("unschedulable_pods") or []:
            key = self._key(p)
            self.placements[key] = None
            self.messages[key] = p.get("message") or ""
            if p.get("nominated_node"):
                self.nominations[key] = p["nominated_node"]
        for p in raw.get("error_pods") or []:
            key = self._key(p)
            self.placements[key] = None
            self.messages[key] = p.get("message") or ""
            self.errors.add(key)
        for key in raw.get("pending_pods") or []:
            self.placements[key] = None
            self.pending.add(key)

    @staticmethod
    def _key(p):
        return f"{p.get('namespace') or 'default'}/{p['name']}"

    def node_of(self, name, namespace="default"):
        key = f"{namespace}/{name}"
        if key not in self.placements:
            raise AssertionError(f"pod {key} is not in the report: {self.raw}")
        return self.placements[key]

    def message_of(self, name, namespace="default"):
        return self.messages.get(f"{namespace}/{name}", "")

    def scheduled(self):
        return {k: v for k, v in self.placements.items() if v}

    def gangs(self):
        """{group name: its entry in "gangs" (outcome, bound, members, reason)}."""
        return {g["name"]: g for g in self.raw.get("gangs") or []}

    def unschedulable(self):
        """Pods not bound: reported unschedulable or still pending."""
        return sorted(k for k, v in self.placements.items() if not v)


def parse_report(stdout):
    """The JSON document podium-sim prints (the last line that is a JSON object,
    so a banner before it does no harm)."""
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return Report(json.loads(line))
            except ValueError:
                break
    try:
        return Report(json.loads(stdout))
    except ValueError as e:
        raise AssertionError(f"podium-sim --output json printed no JSON report ({e}):\n"
                             f"{stdout[-4000:]}")
