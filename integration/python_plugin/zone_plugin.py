#!/usr/bin/python3
"""A Podium plugin process written directly against the protobuf contract (no SDK).

It serves three plugins over one Plugin.Run stream per scheduler connection:

  PreferZone   (Score)  - 100 for nodes whose zone label equals the pod's
                          preferred-zone annotation, 0 otherwise.
  DenyLabel    (Filter) - rejects nodes carrying a label (by default
                          podium.dev/maintenance=true) with reason
                          "node(s) are under maintenance", code UNSCHEDULABLE.
  HoldAtPermit (Permit) - holds a pod annotated podium.dev/hold-at-permit=SECONDS
                          at Permit (answers Wait with that timeout and never
                          allows it, so the scheduler rejects it when the wait
                          times out); other pods pass.

It is the model for plugin authors in other languages (see README.md beside it)
and the misbehaving peer of the integration tests (--misbehave).

Usage:
  zone_plugin.py --listen unix:///tmp/x/python.sock [--stubs BUILD/python]
                 [--misbehave score-out-of-range|unknown-node|hang|crash-after=N]
"""

import argparse
import json
import os
import signal
import ssl
import sys
import threading
from concurrent import futures

PROTOCOL_VERSION = 1
PROCESS_NAME = "podium-python-zone-plugin"

# Defaults of each plugin's args; pluginConfig args (Open.plugins[].args_json)
# override them key by key.
PREFER_ZONE_DEFAULTS = {
    "zoneLabel": "topology.kubernetes.io/zone",
    "annotation": "podium.dev/preferred-zone",
}
DENY_LABEL_DEFAULTS = {
    "label": "podium.dev/maintenance",
    "value": "true",
    "reason": "node(s) are under maintenance",
}

HOLD_AT_PERMIT_DEFAULTS = {
    "annotation": "podium.dev/hold-at-permit",
}

MISBEHAVIOURS = ("score-out-of-range", "unknown-node", "hang", "crash-after=N")


def log(msg):
    print(f"python-plugin: {msg}", file=sys.stderr, flush=True)


def parse_flags(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--listen", required=True,
                   help="unix:///path/to.sock or HOST:PORT (PORT 0 picks a free port)")
    p.add_argument("--stubs", default=None,
                   help="directory holding the generated podium/v1/*_pb2.py "
                        "(<build>/python); default: PYTHONPATH")
    p.add_argument("--misbehave", default=None,
                   help="test mode: " + ", ".join(MISBEHAVIOURS))
    p.add_argument("--workers", type=int, default=8,
                   help="gRPC server threads (one per open stream)")
    p.add_argument("--tls-cert-file", default=None,
                   help="serve TLS on a HOST:PORT --listen with this PEM certificate "
                        "(re-read when it changes)")
    p.add_argument("--tls-private-key-file", default=None, help="the PEM key of --tls-cert-file")
    p.add_argument("--client-ca-file", default=None,
                   help="mTLS: require a client certificate signed by this CA "
                        "(the scheduler's --plugin-tls-cert-file)")
    flags = p.parse_args(argv)
    if bool(flags.tls_cert_file) != bool(flags.tls_private_key_file):
        p.error("--tls-cert-file and --tls-private-key-file go together")
    if flags.client_ca_file and not flags.tls_cert_file:
        p.error("--client-ca-file needs --tls-cert-file and --tls-private-key-file")
    if flags.tls_cert_file and flags.listen.startswith("unix:"):
        p.error("TLS is served on HOST:PORT only (the scheduler dials unix sockets in plaintext)")
    flags.crash_after = None
    if flags.misbehave:
        if flags.misbehave.startswith("crash-after="):
            try:
                flags.crash_after = int(flags.misbehave.split("=", 1)[1])
            except ValueError:
                p.error("--misbehave=crash-after=N needs an integer N")
            if flags.crash_after < 0:
                p.error("--misbehave=crash-after=N needs N >= 0")
        elif flags.misbehave not in MISBEHAVIOURS:
            p.error(f"--misbehave must be one of {', '.join(MISBEHAVIOURS)}")
    return flags


FLAGS = parse_flags(sys.argv[1:]) if __name__ == "__main__" else None
if FLAGS is not None and FLAGS.stubs:
    sys.path.insert(0, FLAGS.stubs)

import grpc  # noqa: E402
from podium.v1 import plugin_pb2, plugin_pb2_grpc  # noqa: E402

Status = plugin_pb2.Status


class ArgsError(Exception):
    pass


def merge_args(plugin, defaults, args_json):
    """pluginConfig args as JSON over the plugin's defaults; unknown keys are errors."""
    args = dict(defaults)
    if not args_json:
        return args
    try:
        given = json.loads(args_json)
    except ValueError as e:
        raise ArgsError(f"{plugin}: args are not valid JSON: {e}")
    if given is None:
        return args
    if not isinstance(given, dict):
        raise ArgsError(f"{plugin}: args must be a JSON object")
    for key, value in given.items():
        if key not in defaults:
            raise ArgsError(f"{plugin}: unknown arg {key!r} "
                            f"(known: {', '.join(sorted(defaults))})")
        if not isinstance(value, str) or not value:
            raise ArgsError(f"{plugin}: arg {key!r} must be a non-empty string")
        args[key] = value
    return args


class PreferZone:
    """Score: a pod annotated with a preferred zone prefers nodes in that zone."""
    name = "PreferZone"
    extension_points = [plugin_pb2.SCORE]

    def __init__(self, args_json):
        self.args = merge_args(self.name, PREFER_ZONE_DEFAULTS, args_json)

    def events(self):
        return []  # Score plugins never reject, so no event can help a pod.

    def score(self, pod, nodes):
        """Scores already in [0, 100]: the normalized scores of the contract."""
        want = pod.meta.annotations.get(self.args["annotation"])
        if not want:
            return [0] * len(nodes)
        label = self.args["zoneLabel"]
        return [100 if n.meta.labels.get(label) == want else 0 for n in nodes]


class DenyLabel:
    """Filter: nodes carrying label=value take no new pods."""
    name = "DenyLabel"
    extension_points = [plugin_pb2.FILTER]

    def __init__(self, args_json):
        self.args = merge_args(self.name, DENY_LABEL_DEFAULTS, args_json)

    def events(self):
        # A node added, or one whose label changed, may have left maintenance.
        return [plugin_pb2.ClusterEventInterest(
            resource=plugin_pb2.NODE,
            action_mask=plugin_pb2.ADD | plugin_pb2.UPDATE_NODE_LABEL,
            has_queueing_hint=True)]

    def filter(self, pod, node):
        """None when the node passes, else the rejecting Status."""
        if node.meta.labels.get(self.args["label"]) == self.args["value"]:
            return Status(code=Status.UNSCHEDULABLE, reasons=[self.args["reason"]],
                          plugin=self.name)
        return None

    def queueing_hint(self, event, pods):
        """Only a node that is (now) out of maintenance may help."""
        if event.WhichOneof("new_object") != "new_node":
            return [True] * len(pods)
        passes = self.filter(None, event.new_node) is None
        return [passes] * len(pods)


class HoldAtPermit:
    """Permit: pods annotated with a number of seconds wait that long at Permit.
    Nothing here ever allows them: the wait ends with the scheduler's timeout
    (a rejection by HoldAtPermit), which is what operators' tools are tested on."""
    name = "HoldAtPermit"
    extension_points = [plugin_pb2.PERMIT]

    def __init__(self, args_json):
        self.args = merge_args(self.name, HOLD_AT_PERMIT_DEFAULTS, args_json)

    def events(self):
        return []

    def permit(self, pod):
        """(Status, timeout_ms) for the pod."""
        value = pod.meta.annotations.get(self.args["annotation"])
        if not value:
            return Status(code=Status.SUCCESS, plugin=self.name), 0
        try:
            seconds = float(value)
        except ValueError:
            seconds = -1
        if not seconds > 0:
            return Status(code=Status.UNSCHEDULABLE_AND_UNRESOLVABLE, plugin=self.name,
                          reasons=[f"annotation {self.args['annotation']}: {value!r} is not a "
                                   "positive number of seconds"]), 0
        return Status(code=Status.WAIT, plugin=self.name), int(seconds * 1000)


PLUGIN_TYPES = {cls.name: cls for cls in (PreferZone, DenyLabel, HoldAtPermit)}


class ProtocolError(Exception):
    """A request this process cannot answer; sent back in the `error` field."""


class Misbehaviour:
    """The test modes: shared by every stream of the process."""

    def __init__(self, mode, crash_after):
        self.mode = mode
        self.crash_after = crash_after
        self.cycles = 0
        self.lock = threading.Lock()

    def before_cycle(self):
        """Returns False when the request must go unanswered."""
        if self.crash_after is not None:
            with self.lock:
                if self.cycles >= self.crash_after:
                    log(f"misbehave: exiting after {self.cycles} cycle requests")
                    os._exit(3)
                self.cycles += 1
        if self.mode == "hang":
            log("misbehave: leaving a cycle request unanswered")
            return False
        return True


class Connection:
    """One Run stream: its plugins, its node mirror. Requests are handled in order,
    so the delta riding in each message is applied before the request it carries."""

    def __init__(self, misbehaviour):
        self.misbehaviour = misbehaviour
        self.plugins = {}   # name -> plugin object, after Open.
        self.nodes = {}     # mirrored node id -> Node.
        self.generation = 0

    # -- state ---------------------------------------------------------------
    def apply_delta(self, delta):
        # Field order: reset, removals, upserts.
        if delta.reset:
            self.nodes.clear()
        for node_id in delta.node_removals:
            self.nodes.pop(node_id, None)
        for m in delta.node_upserts:
            self.nodes[m.id] = m.node
        if delta.generation:
            self.generation = delta.generation

    def node_ids(self, node_set):
        if node_set.all_nodes:
            ids = sorted(self.nodes)
            if not ids:
                return []
            start = node_set.start_index % len(ids)
            return ids[start:] + ids[:start]
        for node_id in node_set.node_ids:
            if node_id not in self.nodes:
                raise ProtocolError(f"node id {node_id} is not in the mirror "
                                    f"(generation {self.generation})")
        return list(node_set.node_ids)

    def served(self, names, kind):
        """The plugins named for extension point `kind`; a name this process does
        not serve is an error, a served plugin without `kind` is a no-op (none of
        ours has PreFilter or PreScore)."""
        out = []
        for name in names:
            plugin = self.plugins.get(name)
            if plugin is None:
                raise ProtocolError(f"{PROCESS_NAME} does not serve plugin {name!r}")
            if hasattr(plugin, kind):
                out.append(plugin)
            elif kind in ("filter", "score", "permit"):
                raise ProtocolError(f"plugin {name} has no {kind} extension point")
        return out

    # -- requests ------------------------------------------------------------
    def handle(self, msg):
        """Returns the answer to `msg`, or None when none is due."""
        if msg.HasField("delta"):
            self.apply_delta(msg.delta)
        kind = msg.WhichOneof("kind")
        if kind == "open":
            return plugin_pb2.PluginToScheduler(id=msg.id, registration=self.open(msg.open))
        if msg.id == 0:
            return None  # A delta or finished_cycles only; nothing to answer.
        answer = plugin_pb2.PluginToScheduler(id=msg.id)
        try:
            if not self.plugins:
                raise ProtocolError(f"{kind} before Open")
            if kind == "cycle":
                if not self.misbehaviour.before_cycle():
                    return None
                answer.cycle.CopyFrom(self.cycle(msg.cycle))
            elif kind == "dry_run_filter":
                answer.dry_run_filter.CopyFrom(self.dry_run_filter(msg.dry_run_filter))
            elif kind == "preemption_dry_run":
                answer.preemption_dry_run.CopyFrom(self.preemption_dry_run(msg.preemption_dry_run))
            elif kind == "queueing_hint":
                answer.queueing_hint.CopyFrom(self.queueing_hint(msg.queueing_hint))
            elif kind == "permit":
                answer.permit.CopyFrom(self.permit(msg.permit))
            else:
                raise ProtocolError(f"{PROCESS_NAME} does not handle {kind or 'empty'} requests")
        except ProtocolError as e:
            log(f"request {msg.id}: {e}")
            answer.error = str(e)
        return answer

    def open(self, open_msg):
        reg = plugin_pb2.Registration(protocol_version=PROTOCOL_VERSION,
                                      process_name=PROCESS_NAME)
        reg.mirror.nodes = True
        if open_msg.protocol_version != PROTOCOL_VERSION:
            reg.error = (f"protocol version {open_msg.protocol_version} is not supported "
                         f"(this plugin speaks {PROTOCOL_VERSION})")
            return reg
        # The plugins the config expects here, with their args; an Open that names
        # none gets every plugin with default args.
        wanted = [(p.name, p.args_json) for p in open_msg.plugins] or \
                 [(name, "") for name in PLUGIN_TYPES]
        plugins = {}
        try:
            for name, args_json in wanted:
                cls = PLUGIN_TYPES.get(name)
                if cls is None:
                    raise ArgsError(f"unknown plugin {name!r}: {PROCESS_NAME} serves "
                                    f"{', '.join(PLUGIN_TYPES)}")
                plugins[name] = cls(args_json)
        except ArgsError as e:
            log(f"refusing Open: {e}")
            reg.error = str(e)
            return reg
        self.plugins = plugins
        for plugin in plugins.values():
            reg.plugins.add(name=plugin.name, extension_points=plugin.extension_points,
                            events=plugin.events())
        log(f"open from scheduler {open_msg.scheduler_id!r}: serving {', '.join(plugins)}")
        return reg

    def cycle(self, req):
        self.served(req.pre_filter_plugins, "pre_filter")
        filters = self.served(req.filter_plugins, "filter")
        self.served(req.pre_score_plugins, "pre_score")
        scorers = self.served(req.score_plugins, "score")
        resp = plugin_pb2.CycleResponse()
        ids = self.node_ids(req.nodes)
        scored = ids
        if filters:
            want = req.num_feasible_to_find
            feasible = []
            evaluated = 0
            for node_id in ids:
                if want and len(feasible) >= want:
                    break
                evaluated += 1
                node = self.nodes[node_id]
                status = None
                for f in filters:
                    status = f.filter(req.pod, node)
                    if status is not None:
                        break
                if status is None:
                    feasible.append(node_id)
                else:
                    resp.rejected.add(node_id=node_id, status=status)
            if self.misbehaviour.mode == "unknown-node":
                bogus = max(self.nodes, default=0) + 1000
                log(f"misbehave: reporting unknown node id {bogus} as feasible")
                feasible.append(bogus)
            resp.feasible.extend(feasible)
            resp.nodes_evaluated = evaluated
            scored = feasible
        for s in scorers:
            nodes = [self.nodes.get(i) for i in scored]
            scores = s.score(req.pod, [n for n in nodes if n is not None])
            if len(scores) != len(scored):  # Only with unknown-node: keep alignment.
                scores += [0] * (len(scored) - len(scores))
            if self.misbehaviour.mode == "score-out-of-range":
                log("misbehave: returning score 1000")
                scores = [1000] * len(scores)
            elif self.misbehaviour.mode == "unknown-node" and not filters:
                # Score-only requests name no node: score one node more than asked.
                log("misbehave: returning a score for a node outside the request")
                scores = scores + [100]
            resp.scores.add(plugin=s.name, scores=scores)
        return resp

    def dry_run_filter(self, req):
        # Preemption's dry run: DenyLabel looks only at the node, so removing or
        # adding pods never changes its verdict.
        filters = self.served(req.filter_plugins, "filter")
        node = self.nodes.get(req.node_id)
        if node is None:
            raise ProtocolError(f"node id {req.node_id} is not in the mirror "
                                f"(generation {self.generation})")
        for f in filters:
            status = f.filter(req.pod, node)
            if status is not None:
                return plugin_pb2.DryRunFilterResponse(status=status)
        return plugin_pb2.DryRunFilterResponse(status=Status(code=Status.SUCCESS))

    def preemption_dry_run(self, req):
        # Batched preemption dry run: per candidate node, the victims this
        # process needs gone. DenyLabel looks only at the node, so it needs no
        # victim where it passes, and no victim helps where it rejects.
        filters = self.served(req.filter_plugins, "filter")
        resp = plugin_pb2.PreemptionDryRunResponse()
        for c in req.candidates:
            node = self.nodes.get(c.node_id)
            if node is None:
                raise ProtocolError(f"node id {c.node_id} is not in the mirror "
                                    f"(generation {self.generation})")
            out = resp.nodes.add(node_id=c.node_id)
            out.status.code = Status.SUCCESS
            for f in filters:
                status = f.filter(req.pod, node)
                if status is not None:
                    out.status.CopyFrom(status)
                    break
            if req.no_reprieve and out.status.code == Status.SUCCESS:
                out.victims.extend(c.potential_victims)
        return resp

    def permit(self, req):
        resp = plugin_pb2.PermitResponse()
        for plugin in self.served(req.plugins, "permit"):
            status, timeout_ms = plugin.permit(req.pod)
            resp.results.add(plugin=plugin.name, status=status, timeout_ms=timeout_ms)
        return resp

    def queueing_hint(self, req):
        resp = plugin_pb2.QueueingHintResponse()
        for q in req.queries:
            plugin = self.plugins.get(q.plugin)
            if plugin is None or not hasattr(plugin, "queueing_hint"):
                queue = [True] * len(q.pods)  # When unsure, requeue.
            else:
                queue = plugin.queueing_hint(req.event, q.pods)
            resp.answers.add(plugin=q.plugin, queue=queue)
        return resp


class PluginService(plugin_pb2_grpc.PluginServicer):
    def __init__(self, misbehaviour):
        self.misbehaviour = misbehaviour

    def Run(self, request_iterator, context):
        conn = Connection(self.misbehaviour)
        log(f"stream opened by {context.peer()}")
        try:
            for msg in request_iterator:
                answer = conn.handle(msg)
                if answer is not None:
                    yield answer
        finally:
            log("stream closed")


class TlsFiles:
    """The server's certificate, key and client CA, re-read when a file changes:
    gRPC asks before each new handshake (dynamic_ssl_server_credentials), so a
    new connection gets the new certificate and open streams keep theirs."""

    def __init__(self, cert, key, ca):
        self.paths = [p for p in (cert, key, ca) if p]
        self.cert, self.key, self.ca = cert, key, ca
        self.version = None

    def _stamp(self):
        return tuple((st.st_ino, st.st_size, st.st_mtime_ns) for st in map(os.stat, self.paths))

    def config(self):
        read = lambda p: open(p, "rb").read() if p else None  # noqa: E731
        return grpc.ssl_server_certificate_configuration(
            [(read(self.key), read(self.cert))], root_certificates=read(self.ca))

    def initial(self):
        self.version = self._stamp()
        return self.config()

    def fetch(self):
        """None keeps the current configuration."""
        try:
            stamp = self._stamp()
            if stamp == self.version:
                return None
            # A key and a certificate caught mid-replacement do not match:
            # keep the pair in use until both are new.
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(self.cert, self.key)
            config = self.config()
        except (OSError, ValueError, ssl.SSLError) as e:
            log(f"TLS files: {e}; keeping the certificate in use")
            return None
        self.version = stamp
        log("TLS files changed: new connections get the new certificate")
        return config


def serve(flags):
    misbehaviour = Misbehaviour(flags.misbehave, flags.crash_after)
    # A full state of a large cluster is one message: take what the C++ SDK
    # takes (512 MiB) instead of gRPC's default of 4 MiB.
    max_bytes = 512 * 1024 * 1024
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=flags.workers),
                         options=[("grpc.max_receive_message_length", max_bytes),
                                  ("grpc.max_send_message_length", max_bytes)])
    plugin_pb2_grpc.add_PluginServicer_to_server(PluginService(misbehaviour), server)
    address = flags.listen
    if address.startswith("unix:"):
        path = address[len("unix://"):] if address.startswith("unix://") else address[5:]
        if os.path.exists(path):
            os.unlink(path)  # A stale socket from a previous run.
        bound = server.add_insecure_port(address)
        if not bound:
            log(f"cannot listen on {address}")
            return 2
    else:
        try:
            if flags.tls_cert_file:
                files = TlsFiles(flags.tls_cert_file, flags.tls_private_key_file, flags.client_ca_file)
                creds = grpc.dynamic_ssl_server_credentials(
                    files.initial(), files.fetch,
                    require_client_authentication=bool(flags.client_ca_file))
                port = server.add_secure_port(address, creds)
            else:
                port = server.add_insecure_port(address)
        except (RuntimeError, OSError) as e:
            port = 0
            log(f"cannot listen on {address}: {e}")
        if not port:
            return 2
        host = address.rsplit(":", 1)[0]
        address = f"{host}:{port}"
    server.start()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    if flags.misbehave:
        log(f"misbehaving on purpose: {flags.misbehave}")
    print(f"python-plugin listening on {address}", file=sys.stderr, flush=True)
    stop.wait()
    server.stop(grace=1).wait()
    return 0


if __name__ == "__main__":
    sys.exit(serve(FLAGS))
