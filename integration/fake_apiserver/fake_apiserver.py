#!/usr/bin/python3
"""A fake kube-apiserver for Podium's integration tests (Python 3 stdlib only).

It keeps the API conventions podium-k8s-adapter relies on:
  - paged lists (limit / continue) of a consistent snapshot, with the list's
    resourceVersion; an expired continue token is 410 Gone; fieldSelector on
    spec.nodeName, status.phase, metadata.name and metadata.namespace
    (=, ==, !=; other fields are 400, as the API answers);
  - watches as chunked streams of JSON events (ADDED / MODIFIED / DELETED),
    BOOKMARKs when allowWatchBookmarks=true, ERROR 410 for a compacted
    resourceVersion, ended after timeoutSeconds;
  - pods/NAME/binding (409 when already bound or the uid differs), DELETE with
    preconditions.uid (409 on mismatch); with "termination_grace_ms" set, a
    bound pod's DELETE sets metadata.deletionTimestamp (a MODIFIED event) and
    the pod goes (DELETED) after that grace, as when its kubelet confirms; a
    DELETE of a terminating pod answers it again; an unbound pod goes at once,
    as the API does; PATCH of pods/NAME/status (strategic
    merge: conditions merged by type; or JSON merge patch), POST of pods;
  - events.k8s.io/v1 events: POST stores (409 on a name taken), PATCH (merge)
    updates one, e.g. its series.count / series.lastObservedTime (422 when a
    series has count < 2 or no lastObservedTime; 404 for an unknown event);
  - PodGroups (scheduling.x-k8s.io/v1alpha1, scheduling.k8s.io/v1alpha2) and
    Workloads (scheduling.k8s.io/v1alpha1): list and watch; an API group in
    "absent_groups" answers 404, as a cluster without it does;
  - coordination.k8s.io/v1 Leases: GET, POST (409 if it exists), PUT with
    metadata.resourceVersion (409 when it is not the current one);
  - every other path is 404 (an absent API group).

Faults and objects are driven through /control (JSON):
  POST /control/objects  {"objects": [Node or Pod, ...]}           create
  POST /control/delete   {"objects": [{"kind", "apiVersion", "namespace", "name"}]}
  POST /control/faults   {"fail": [{"verb": "bind", "status": 500, "count": 3,
                                     "retry_after": 1, "resource": "pods"}],
                          "commit_then_fail": [{"verb": "bind", "count": 2}],
                          "drop_watches": true, "watch_outage": true|false,
                          "compact": true, "delay_ms": 20, "list_delay_ms": 200,
                          "termination_grace_ms": 1500,
                          "absent_groups": ["scheduling.k8s.io", ...]}
  GET  /control/stats    counters: requests by verb, successful binds per pod,
                         bind conflicts, faults served, events by reason, ...
verbs: list, watch, get, create, bind, delete, patch, event, event_patch, lease.
A "fail" fault with "resource" (e.g. "pods", "nodes") applies to lists of that
resource only.

Authentication (optional): --tls-cert/--tls-key serve HTTPS, --client-ca asks for
a client certificate signed by that CA, --token-file requires
"Authorization: Bearer <the file's content>" (401 otherwise). The file is read
on every request; a token seen in it stays valid until
POST /control/faults {"revoke_old_tokens": true} (a rotated token's grace).

Run: fake_apiserver.py [--port 0] ; prints "fake-apiserver listening on HOST:PORT".
"""

import argparse
import bisect
import ssl
import copy
import json
import sys
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BOOKMARK_INTERVAL = 1.0


def now_rfc3339():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def status_body(code, reason, message):
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


FIELDS = {"spec.nodeName": ("spec", "nodeName"), "status.phase": ("status", "phase"),
          "metadata.name": ("metadata", "name"), "metadata.namespace": ("metadata", "namespace")}


def parse_field_selector(text):
    """[(path, op, value)] from "a=b,c!=d"; ValueError for what the API refuses."""
    terms = []
    for term in filter(None, text.split(",")):
        for op in ("!=", "==", "="):
            if op in term:
                field, value = term.split(op, 1)
                break
        else:
            raise ValueError(f"invalid field selector: {term!r}")
        if field not in FIELDS:
            raise ValueError(f"field label not supported: {field}")
        terms.append((FIELDS[field], "!=" if op == "!=" else "=", value))
    return terms


def matches_fields(obj, terms):
    for (a, b), op, value in terms:
        have = (obj.get(a) or {}).get(b) or ""
        if (have == value) != (op == "="):
            return False
    return True


class Faults:
    def __init__(self):
        self.fail = []             # [{"verb", "status", "count", "retry_after"}]
        self.commit_then_fail = []  # [{"verb", "count"}]: do it, then answer 500
        self.watch_outage = False
        self.drop_generation = 0
        self.delay = 0.0
        self.list_delay = 0.0      # Before each list page (a slow list of a big cluster).
        self.termination_grace = 0.0  # A bound pod's DELETE: terminating this long, then gone.


class Cluster:
    """Objects, the event log watches read, counters. One lock (a Condition)."""

    KINDS = {"nodes": ("Node", "v1"), "pods": ("Pod", "v1"),
             "poddisruptionbudgets": ("PodDisruptionBudget", "policy/v1"),
             "namespaces": ("Namespace", "v1"),
             # Gangs: resources of API groups that may be absent (--absent-group).
             "podgroups.scheduling.x-k8s.io": ("PodGroup", "scheduling.x-k8s.io/v1alpha1"),
             "podgroups.scheduling.k8s.io": ("PodGroup", "scheduling.k8s.io/v1alpha2"),
             "workloads.scheduling.k8s.io": ("Workload", "scheduling.k8s.io/v1alpha1")}
    NAMESPACED = ("pods", "poddisruptionbudgets", "podgroups.scheduling.x-k8s.io", "podgroups.scheduling.k8s.io",
                  "workloads.scheduling.k8s.io")

    @classmethod
    def resource_of(cls, kind, api_version):
        """The KINDS key of a kind and apiVersion (None: not served)."""
        for resource, (k, api) in cls.KINDS.items():
            if k == kind and (api == api_version or kind not in ("PodGroup",)):
                return resource
        return None

    def __init__(self):
        self.cv = threading.Condition()
        self.rv = 1000
        self.objects = {r: {} for r in self.KINDS}  # (namespace, name) -> object
        self.log = []       # (rv, resource, namespace, the event as a watch chunk)
        self.log_rvs = []
        self.compacted = 0  # Watches from a resourceVersion below this get 410.
        self.snapshots = {}  # continue token id -> (rv, items)
        self.faults = Faults()
        self.requests = {}
        self.binds = {}     # "ns/name" -> successful binds
        self.binds_by_agent = {}  # User-Agent -> successful binds
        self.leases = {}    # (namespace, name) -> Lease
        self.lease_conflicts = 0
        self.lease_written_at = {}  # "ns/name" -> time.monotonic() of the last successful write
        self.last_bind_at_by_agent = {}  # User-Agent -> time.monotonic() of its last successful bind
        self.bind_conflicts = 0
        self.faults_served = {}
        self.events = {}    # reason -> count
        self.event_objects = {}  # (namespace, name) -> the events.k8s.io/v1 Event as stored
        self.event_patches = 0
        self.absent_groups = set()  # API groups answered with 404 (not installed)
        self.event_log = []  # [namespace/name, type, reason, note], the last 10000
        self.watches_open = 0
        self.watches_dropped = 0
        self.gone_served = 0
        self.first_bind_at = None  # time.monotonic() of the first successful bind
        self.list_pages = {}       # resource -> [time.monotonic() of each page served]
        self.token_file = None
        self.valid_tokens = set()
        self.unauthorized = 0
        self.deletes = {}   # "ns/name" -> DELETEs that passed their preconditions
        self.deletes_with_uid = {}  # ... of which carried preconditions.uid

    # -- objects (lock held) -------------------------------------------------

    def _next_rv(self):
        self.rv += 1
        return str(self.rv)

    # Stored objects are never changed in place (writers copy what they change),
    # so lists and the log share them; the log keeps each event serialized once,
    # as the watch chunk every watcher writes.
    def _record(self, resource, type_, obj):
        rv = int(obj["metadata"]["resourceVersion"])
        data = json.dumps({"type": type_, "object": obj}, separators=(",", ":")).encode() + b"\n"
        chunk = b"%x\r\n%s\r\n" % (len(data), data)
        self.log.append((rv, resource, obj["metadata"].get("namespace"), chunk))
        self.log_rvs.append(rv)
        self.cv.notify_all()

    def create(self, resource, obj):
        kind, api = self.KINDS[resource]
        obj = dict(obj)  # A fresh request body: a shallow copy of what is changed is enough.
        obj["metadata"] = dict(obj.get("metadata") or {})
        obj["kind"] = kind
        obj["apiVersion"] = api
        meta = obj["metadata"]
        if resource in self.NAMESPACED:
            meta.setdefault("namespace", "default")
        if resource == "pods":
            obj.setdefault("status", {}).setdefault("phase", "Pending")
            obj.setdefault("spec", {})
        key = (meta.get("namespace", ""), meta["name"])
        if key in self.objects[resource]:
            return 409, status_body(409, "AlreadyExists", f"{resource} \"{meta['name']}\" already exists")
        meta["uid"] = meta.get("uid") or str(uuid.uuid4())
        meta.setdefault("creationTimestamp", now_rfc3339())
        meta["resourceVersion"] = self._next_rv()
        self.objects[resource][key] = obj
        self._record(resource, "ADDED", obj)
        return 201, obj

    def modify(self, resource, key, obj):
        obj["metadata"]["resourceVersion"] = self._next_rv()
        self.objects[resource][key] = obj
        self._record(resource, "MODIFIED", obj)

    def delete(self, resource, key):
        obj = dict(self.objects[resource].pop(key))
        obj["metadata"] = dict(obj["metadata"])
        obj["metadata"]["resourceVersion"] = self._next_rv()
        self._record(resource, "DELETED", obj)
        return obj

    # -- faults (lock held) --------------------------------------------------

    def take_fault(self, verb, table, resource=None):
        for f in table:
            if (f.get("count", 0) > 0 and f.get("verb") in (verb, "any")
                    and f.get("resource") in (None, resource)):
                f["count"] -= 1
                name = f"{verb}:{f.get('status', 500)}" + (":commit" if table is self.faults.commit_then_fail else "")
                self.faults_served[name] = self.faults_served.get(name, 0) + 1
                return f
        return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-apiserver/1"
    cluster = None  # Set by main.

    def log_message(self, fmt, *args):  # Quiet: tests read counters instead.
        pass

    # -- plumbing ------------------------------------------------------------

    def _body(self):
        n = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(n) if n else b""
        if not data:
            return {}
        try:
            return json.loads(data)
        except ValueError:
            return None

    def _send(self, code, obj, headers=None):
        data = json.dumps(obj, separators=(",", ":")).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _count(self, verb):
        c = self.cluster
        with c.cv:
            key = f"{self.command} {verb}"
            c.requests[key] = c.requests.get(key, 0) + 1

    def _fault(self, verb, resource=None):
        """Answers with an injected failure (and returns True) when one is due."""
        c = self.cluster
        with c.cv:
            delay = c.faults.delay
            f = c.take_fault(verb, c.faults.fail, resource)
        if delay:
            time.sleep(delay)
        if f is None:
            return False
        code = f.get("status", 500)
        headers = {}
        if f.get("retry_after") is not None:
            headers["Retry-After"] = str(f["retry_after"])
        reason = {429: "TooManyRequests", 403: "Forbidden"}.get(code, "InternalError")
        self._send(code, status_body(code, reason, f"injected fault {code}"), headers)
        return True

    def _commit_fault(self, verb):
        c = self.cluster
        with c.cv:
            return c.take_fault(verb, c.faults.commit_then_fail) is not None

    def _authorized(self):
        """False (after a 401) when a token is required and this is not it."""
        c = self.cluster
        if not c.token_file or self.path.startswith("/control/"):
            return True
        with open(c.token_file) as f:
            current = f.read().strip()
        header = self.headers.get("Authorization", "")
        with c.cv:
            c.valid_tokens.add(current)
            ok = header.startswith("Bearer ") and header[7:] in c.valid_tokens
            if not ok:
                c.unauthorized += 1
        if not ok:
            self._body()
            self._send(401, status_body(401, "Unauthorized", "Unauthorized"))
        return ok

    def _route(self):
        url = urllib.parse.urlsplit(self.path)
        parts = [p for p in url.path.split("/") if p]
        query = dict(urllib.parse.parse_qsl(url.query))
        return parts, query

    # -- verbs ----------------------------------------------------------------

    def do_GET(self):
        if not self._authorized():
            return
        parts, query = self._route()
        if parts[:2] == ["control", "stats"]:
            if query.get("brief"):
                with self.cluster.cv:
                    pods = self.cluster.objects["pods"].values()
                    return self._send(200, {"pods": len(pods),
                                            "bound": sum(1 for p in pods if p["spec"].get("nodeName")),
                                            "requests": dict(self.cluster.requests)})
            return self._send(200, self._stats())
        if parts[:2] == ["api", "v1"]:
            # /api/v1/nodes, /api/v1/pods, /api/v1/namespaces/NS/pods[/NAME]
            if len(parts) == 3 and parts[2] in ("nodes", "pods", "namespaces"):
                return self._list_or_watch(parts[2], None, query)
            if len(parts) == 4 and parts[2] == "nodes":
                return self._get("nodes", ("", parts[3]))
            if len(parts) == 5 and parts[2] == "namespaces" and parts[4] == "pods":
                return self._list_or_watch("pods", parts[3], query)
            if len(parts) == 6 and parts[2] == "namespaces" and parts[4] == "pods":
                return self._get("pods", (parts[3], parts[5]))
        if parts == ["apis", "policy", "v1", "poddisruptionbudgets"]:
            return self._list_or_watch("poddisruptionbudgets", None, query)
        if len(parts) == 4 and parts[0] == "apis" and parts[1] not in self.cluster.absent_groups:
            resource = f"{parts[3]}.{parts[1]}"
            if Cluster.KINDS.get(resource, ("", ""))[1] == f"{parts[1]}/{parts[2]}":
                return self._list_or_watch(resource, None, query)
        if len(parts) == 7 and parts[:4] == ["apis", "coordination.k8s.io", "v1", "namespaces"] and parts[5] == "leases":
            self._count("lease")
            if self._fault("lease"):
                return
            with self.cluster.cv:
                lease = copy.deepcopy(self.cluster.leases.get((parts[4], parts[6])))
            if lease is None:
                return self._send(404, status_body(404, "NotFound", f"leases \"{parts[6]}\" not found"))
            return self._send(200, lease)
        self._count("other")
        self._send(404, status_body(404, "NotFound", f"the server could not find the requested resource ({self.path})"))

    def do_POST(self):
        if not self._authorized():
            return
        parts, _ = self._route()
        body = self._body()
        if body is None:
            return self._send(400, status_body(400, "BadRequest", "body is not JSON"))
        if parts[:1] == ["control"]:
            return self._control(parts[1:], body)
        if len(parts) == 5 and parts[:3] == ["api", "v1", "namespaces"] and parts[4] == "pods":
            self._count("create")
            if self._fault("create"):
                return
            body.setdefault("metadata", {})["namespace"] = parts[3]
            with self.cluster.cv:
                code, obj = self.cluster.create("pods", body)
            return self._send(code, obj)
        if len(parts) == 7 and parts[:3] == ["api", "v1", "namespaces"] and parts[4] == "pods" and parts[6] == "binding":
            return self._bind(parts[3], parts[5], body)
        if len(parts) == 6 and parts[:4] == ["apis", "coordination.k8s.io", "v1", "namespaces"] and parts[5] == "leases":
            return self._write_lease(parts[4], (body.get("metadata") or {}).get("name", ""), body, create=True)
        if len(parts) == 6 and parts[:3] == ["apis", "events.k8s.io", "v1"] and parts[5] == "events":
            self._count("event")
            if self._fault("event"):
                return
            with self.cluster.cv:
                reason = body.get("reason", "")
                self.cluster.events[reason] = self.cluster.events.get(reason, 0) + 1
                r = body.get("regarding") or {}
                self.cluster.event_log.append([f"{r.get('namespace', '')}/{r.get('name', '')}", body.get("type"),
                                               reason, body.get("note", "")])
                del self.cluster.event_log[:-10000]
                meta = body.setdefault("metadata", {})
                meta["namespace"] = parts[4]
                meta["resourceVersion"] = self.cluster._next_rv()
                key = (parts[4], meta.get("name", ""))
                if key in self.cluster.event_objects:
                    return self._send(409, status_body(409, "AlreadyExists", f"events \"{key[1]}\" already exists"))
                self.cluster.event_objects[key] = body
                if len(self.cluster.event_objects) > 20000:
                    self.cluster.event_objects.pop(next(iter(self.cluster.event_objects)))
            return self._send(201, body)
        self._count("other")
        self._send(404, status_body(404, "NotFound", f"no such resource ({self.path})"))

    def do_DELETE(self):
        if not self._authorized():
            return
        parts, _ = self._route()
        body = self._body() or {}
        if len(parts) == 6 and parts[:3] == ["api", "v1", "namespaces"] and parts[4] == "pods":
            self._count("delete")
            if self._fault("delete"):
                return
            c = self.cluster
            key = (parts[3], parts[5])
            with c.cv:
                pod = c.objects["pods"].get(key)
                if pod is None:
                    return self._send(404, status_body(404, "NotFound", f"pods \"{parts[5]}\" not found"))
                want = (body.get("preconditions") or {}).get("uid")
                have = pod["metadata"]["uid"]
                if want and want != have:
                    return self._send(409, status_body(
                        409, "Conflict", f"Precondition failed: UID in precondition: {want}, "
                                         f"UID in object meta: {have}"))
                name = f"{key[0]}/{key[1]}"
                c.deletes[name] = c.deletes.get(name, 0) + 1
                if want:
                    c.deletes_with_uid[name] = c.deletes_with_uid.get(name, 0) + 1
                grace = c.faults.termination_grace
                if grace <= 0 or not pod.get("spec", {}).get("nodeName"):
                    obj = c.delete("pods", key)
                elif pod["metadata"].get("deletionTimestamp"):
                    obj = pod  # Already terminating: the API answers the object again.
                else:
                    obj = copy.deepcopy(pod)
                    obj["metadata"]["deletionTimestamp"] = now_rfc3339()
                    obj["metadata"]["deletionGracePeriodSeconds"] = max(1, round(grace))
                    c.modify("pods", key, obj)
                    threading.Timer(grace, self._finish_termination, (key, have)).start()
            return self._send(200, obj)
        self._count("other")
        self._send(404, status_body(404, "NotFound", f"no such resource ({self.path})"))

    def _finish_termination(self, key, uid):
        """The kubelet's confirmation: the terminating pod goes, if it is still that pod."""
        c = self.cluster
        with c.cv:
            pod = c.objects["pods"].get(key)
            if pod is not None and pod["metadata"]["uid"] == uid:
                c.delete("pods", key)

    def do_PATCH(self):
        if not self._authorized():
            return
        parts, _ = self._route()
        body = self._body()
        if body is None:
            return self._send(400, status_body(400, "BadRequest", "body is not JSON"))
        if len(parts) == 7 and parts[:3] == ["apis", "events.k8s.io", "v1"] and parts[5] == "events":
            return self._patch_event(parts[4], parts[6], body)
        if len(parts) == 7 and parts[:3] == ["api", "v1", "namespaces"] and parts[4] == "pods" and parts[6] == "status":
            self._count("patch")
            if self._fault("patch"):
                return
            ctype = self.headers.get("Content-Type", "")
            if ctype not in ("application/strategic-merge-patch+json", "application/merge-patch+json"):
                return self._send(415, status_body(415, "UnsupportedMediaType", f"content type {ctype}"))
            c = self.cluster
            key = (parts[3], parts[5])
            with c.cv:
                pod = c.objects["pods"].get(key)
                if pod is None:
                    return self._send(404, status_body(404, "NotFound", f"pods \"{parts[5]}\" not found"))
                pod = copy.deepcopy(pod)
                status = pod.setdefault("status", {})
                for k, v in (body.get("status") or {}).items():
                    if k == "conditions" and ctype.startswith("application/strategic") and v is not None:
                        by_type = {x.get("type"): x for x in status.get("conditions") or []}
                        for cond in v:
                            by_type[cond.get("type")] = {**by_type.get(cond.get("type"), {}), **cond}
                        status["conditions"] = list(by_type.values())
                    elif v is None:
                        status.pop(k, None)
                    else:
                        status[k] = v
                c.modify("pods", key, pod)
            return self._send(200, pod)
        self._count("other")
        self._send(404, status_body(404, "NotFound", f"no such resource ({self.path})"))

    def _patch_event(self, ns, name, body):
        """A JSON merge patch (or strategic merge: the same for an Event's
        fields) of an events.k8s.io/v1 Event: how a recorder bumps a series."""
        self._count("event_patch")
        if self._fault("event_patch"):
            return
        ctype = self.headers.get("Content-Type", "")
        if ctype not in ("application/strategic-merge-patch+json", "application/merge-patch+json"):
            return self._send(415, status_body(415, "UnsupportedMediaType", f"content type {ctype}"))

        def merge(target, patch):
            for k, v in patch.items():
                if v is None:
                    target.pop(k, None)
                elif isinstance(v, dict) and isinstance(target.get(k), dict):
                    merge(target[k], v)
                else:
                    target[k] = copy.deepcopy(v)

        c = self.cluster
        with c.cv:
            event = c.event_objects.get((ns, name))
            if event is None:
                return self._send(404, status_body(404, "NotFound", f"events.events.k8s.io \"{name}\" not found"))
            series = body.get("series")
            if series is not None and (not isinstance(series.get("count"), int) or series["count"] < 2 or
                                       not series.get("lastObservedTime")):
                return self._send(422, status_body(422, "Invalid", "series.count must be at least 2 and "
                                                   "series.lastObservedTime set"))
            merge(event, body)
            event["metadata"]["resourceVersion"] = c._next_rv()
            c.event_patches += 1
            out = copy.deepcopy(event)
        return self._send(200, out)

    def do_PUT(self):
        if not self._authorized():
            return
        parts, _ = self._route()
        body = self._body()
        if body is None:
            return self._send(400, status_body(400, "BadRequest", "body is not JSON"))
        if len(parts) == 7 and parts[:4] == ["apis", "coordination.k8s.io", "v1", "namespaces"] and parts[5] == "leases":
            return self._write_lease(parts[4], parts[6], body, create=False)
        self._count("other")
        self._send(404, status_body(404, "NotFound", f"no such resource ({self.path})"))

    def _write_lease(self, ns, name, body, create):
        self._count("lease")
        if self._fault("lease"):
            return
        c = self.cluster
        with c.cv:
            current = c.leases.get((ns, name))
            if create and current is not None:
                c.lease_conflicts += 1
                return self._send(409, status_body(409, "AlreadyExists", f"leases \"{name}\" already exists"))
            if not create:
                if current is None:
                    return self._send(404, status_body(404, "NotFound", f"leases \"{name}\" not found"))
                if (body.get("metadata") or {}).get("resourceVersion") != current["metadata"]["resourceVersion"]:
                    c.lease_conflicts += 1
                    return self._send(409, status_body(
                        409, "Conflict", f"Operation cannot be fulfilled on leases.coordination.k8s.io \"{name}\": "
                                         "the object has been modified; please apply your changes to the latest "
                                         "version and try again"))
            lease = copy.deepcopy(body)
            meta = lease.setdefault("metadata", {})
            meta.update({"name": name, "namespace": ns, "resourceVersion": c._next_rv()})
            meta.setdefault("uid", (current or {}).get("metadata", {}).get("uid") or str(uuid.uuid4()))
            c.leases[(ns, name)] = lease
            c.lease_written_at[f"{ns}/{name}"] = time.monotonic()
        self._send(201 if create else 200, lease)

    # -- pods/binding ---------------------------------------------------------

    def _bind(self, ns, name, body):
        self._count("bind")
        if self._fault("bind"):
            return
        c = self.cluster
        key = (ns, name)
        node = ((body or {}).get("target") or {}).get("name", "")
        with c.cv:
            pod = c.objects["pods"].get(key)
            if pod is None:
                return self._send(404, status_body(404, "NotFound", f"pods \"{name}\" not found"))
            uid = ((body or {}).get("metadata") or {}).get("uid")
            if uid and uid != pod["metadata"]["uid"]:
                c.bind_conflicts += 1
                return self._send(409, status_body(409, "Conflict", f"Operation cannot be fulfilled on pods/binding "
                                                   f"\"{name}\": the UID in the precondition does not match"))
            if pod.get("spec", {}).get("nodeName"):
                c.bind_conflicts += 1
                return self._send(409, status_body(
                    409, "Conflict", f"pod {name} is already assigned to node \"{pod['spec']['nodeName']}\""))
            if not node:
                return self._send(400, status_body(400, "BadRequest", "target.name: Required value"))
            pod = dict(pod, metadata=dict(pod["metadata"]), spec=dict(pod["spec"]), status=dict(pod["status"]))
            pod["spec"]["nodeName"] = node
            conds = [x for x in pod["status"].get("conditions") or [] if x.get("type") != "PodScheduled"]
            conds.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": now_rfc3339()})
            pod["status"]["conditions"] = conds
            c.modify("pods", key, pod)
            if c.first_bind_at is None:
                c.first_bind_at = time.monotonic()
            k = f"{ns}/{name}"
            c.binds[k] = c.binds.get(k, 0) + 1
            agent = self.headers.get("User-Agent", "")
            c.binds_by_agent[agent] = c.binds_by_agent.get(agent, 0) + 1
            c.last_bind_at_by_agent[agent] = time.monotonic()
        if self._commit_fault("bind"):
            return self._send(500, status_body(500, "InternalError", "injected fault after the binding was stored"))
        self._send(201, {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201})

    # -- get, list, watch -----------------------------------------------------

    def _get(self, resource, key):
        self._count("get")
        if self._fault("get"):
            return
        with self.cluster.cv:
            obj = copy.deepcopy(self.cluster.objects[resource].get(key))
        if obj is None:
            return self._send(404, status_body(404, "NotFound", f"{resource} \"{key[1]}\" not found"))
        self._send(200, obj)

    def _list_or_watch(self, resource, namespace, query):
        if query.get("watch") in ("1", "true"):
            return self._watch(resource, namespace, query)
        self._count("list")
        if self._fault("list", resource):
            return
        c = self.cluster
        limit = int(query.get("limit") or 0)
        token = query.get("continue")
        try:
            selector = parse_field_selector(query.get("fieldSelector") or "")
        except ValueError as e:
            return self._send(400, status_body(400, "BadRequest", str(e)))
        with c.cv:
            list_delay = c.faults.list_delay
        if list_delay:
            time.sleep(list_delay)
        with c.cv:
            if token:
                snap = c.snapshots.get(token.split(":")[0])
                if snap is None or snap[0] < c.compacted:
                    c.gone_served += 1
                    return self._send(410, status_body(410, "Expired", "The provided continue parameter is too old"))
                rv, items = snap
                offset = int(token.split(":")[1])
            else:
                rv = c.rv
                items = [o for k, o in sorted(c.objects[resource].items())
                         if (namespace is None or k[0] == namespace) and matches_fields(o, selector)]
                offset = 0
            page = items[offset:offset + limit] if limit else items[offset:]
            meta = {"resourceVersion": str(rv)}
            if limit and offset + limit < len(items):
                sid = token.split(":")[0] if token else uuid.uuid4().hex
                c.snapshots[sid] = (rv, items)
                meta["continue"] = f"{sid}:{offset + limit}"
            c.list_pages.setdefault(resource, []).append(time.monotonic())
        kind, api = Cluster.KINDS[resource]
        self._send(200, {"kind": f"{kind}List", "apiVersion": api, "metadata": meta, "items": page})

    def _chunk(self, obj):
        data = json.dumps(obj, separators=(",", ":")).encode() + b"\n"
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _watch(self, resource, namespace, query):
        self._count("watch")
        c = self.cluster
        with c.cv:
            outage = c.faults.watch_outage
        if outage:
            with c.cv:
                c.faults_served["watch:outage"] = c.faults_served.get("watch:outage", 0) + 1
            return self._send(503, status_body(503, "ServiceUnavailable", "injected watch outage"))
        if self._fault("watch"):
            return
        bookmarks = query.get("allowWatchBookmarks") in ("1", "true")
        timeout = float(query.get("timeoutSeconds") or 1800)
        kind, api = Cluster.KINDS[resource]
        with c.cv:
            start = query.get("resourceVersion") or ""
            cursor = int(start) if start not in ("", "0") else c.rv
            gone = cursor < c.compacted
            if gone:
                c.gone_served += 1
            generation = c.faults.drop_generation
            c.watches_open += 1
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            if gone:
                self._chunk({"type": "ERROR", "object": status_body(
                    410, "Expired", f"too old resource version: {cursor} ({c.compacted})")})
                self.wfile.write(b"0\r\n\r\n")
                return
            deadline = time.monotonic() + timeout
            last_bookmark = time.monotonic()
            while True:
                with c.cv:
                    i = bisect.bisect_right(c.log_rvs, cursor)
                    if i >= len(c.log) and c.faults.drop_generation == generation:
                        c.cv.wait(0.2)
                        i = bisect.bisect_right(c.log_rvs, cursor)
                    if c.faults.drop_generation != generation:
                        c.watches_dropped += 1
                        self.close_connection = True
                        return  # Mid-stream, without the last chunk: the client sees a broken stream.
                    batch = b"".join(e[3] for e in c.log[i:] if e[1] == resource and
                                     (namespace is None or e[2] == namespace))
                    if i < len(c.log):
                        cursor = c.log[-1][0]
                    current = c.rv
                if batch:
                    self.wfile.write(batch)
                now = time.monotonic()
                if bookmarks and now - last_bookmark >= BOOKMARK_INTERVAL:
                    cursor = max(cursor, current)
                    self._chunk({"type": "BOOKMARK", "object": {
                        "kind": kind, "apiVersion": api, "metadata": {"resourceVersion": str(cursor)}}})
                    last_bookmark = now
                if now >= deadline:
                    self.wfile.write(b"0\r\n\r\n")
                    return
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        finally:
            with c.cv:
                c.watches_open -= 1

    # -- control ----------------------------------------------------------------

    def _control(self, parts, body):
        c = self.cluster
        if parts == ["objects"]:
            results = []
            with c.cv:
                for obj in body.get("objects") or []:
                    resource = Cluster.resource_of(obj.get("kind"), obj.get("apiVersion"))
                    if resource is None:
                        results.append(f"unknown kind {obj.get('kind')}")
                        continue
                    code, _ = c.create(resource, obj)
                    results.append(code)
            return self._send(200, {"results": results})
        if parts == ["delete"]:
            # {"objects": [{"kind", "apiVersion", "namespace", "name"}]}: deleted
            # as the API would (a DELETED event), whatever their kind.
            results = []
            with c.cv:
                for ref in body.get("objects") or []:
                    resource = Cluster.resource_of(ref.get("kind"), ref.get("apiVersion"))
                    ns = ref.get("namespace", "default") if resource in Cluster.NAMESPACED else ""
                    if resource is None or (ns, ref.get("name")) not in c.objects[resource]:
                        results.append(404)
                        continue
                    c.delete(resource, (ns, ref["name"]))
                    results.append(200)
            return self._send(200, {"results": results})
        if parts == ["faults"]:
            with c.cv:
                f = c.faults
                f.fail.extend(copy.deepcopy(body.get("fail") or []))
                f.commit_then_fail.extend(copy.deepcopy(body.get("commit_then_fail") or []))
                if "watch_outage" in body:
                    f.watch_outage = bool(body["watch_outage"])
                if "delay_ms" in body:
                    f.delay = float(body["delay_ms"]) / 1000.0
                if "list_delay_ms" in body:
                    f.list_delay = float(body["list_delay_ms"]) / 1000.0
                if "termination_grace_ms" in body:
                    f.termination_grace = float(body["termination_grace_ms"]) / 1000.0
                if body.get("revoke_old_tokens") and c.token_file:
                    with open(c.token_file) as tf:
                        c.valid_tokens = {tf.read().strip()}
                if "absent_groups" in body:
                    c.absent_groups = set(body["absent_groups"])
                if body.get("compact"):
                    c.compacted = c.rv
                if body.get("drop_watches") or body.get("watch_outage"):
                    f.drop_generation += 1
                c.cv.notify_all()
            return self._send(200, {"ok": True})
        if parts == ["update"]:
            # {"namespace", "name", "status": {...}}: merges into a pod's status (e.g. phase).
            key = (body.get("namespace", "default"), body["name"])
            with c.cv:
                pod = c.objects["pods"].get(key)
                if pod is None:
                    return self._send(404, {"error": "no such pod"})
                pod = copy.deepcopy(pod)
                pod.setdefault("status", {}).update(body.get("status") or {})
                c.modify("pods", key, pod)
            return self._send(200, pod)
        self._send(404, {"error": f"unknown control {parts}"})

    def _stats(self):
        c = self.cluster
        with c.cv:
            return {
                "rv": c.rv,
                "requests": dict(c.requests),
                "binds": dict(c.binds),
                "bind_conflicts": c.bind_conflicts,
                "faults_served": dict(c.faults_served),
                "faults_pending": sum(f.get("count", 0) for f in c.faults.fail + c.faults.commit_then_fail),
                "events": dict(c.events),
                "event_log": list(c.event_log),
                "event_patches": c.event_patches,
                # "namespace/name" -> [reason, regarding "ns/name", note, series count or 1]
                "event_objects": {f"{k[0]}/{k[1]}": [e.get("reason"), "{}/{}".format(
                    (e.get("regarding") or {}).get("namespace", ""), (e.get("regarding") or {}).get("name", "")),
                    e.get("note", ""), (e.get("series") or {}).get("count", 1)]
                    for k, e in c.event_objects.items()},
                "watches_open": c.watches_open,
                "watches_dropped": c.watches_dropped,
                "gone_served": c.gone_served,
                "first_bind_at": c.first_bind_at,
                "list_pages": {r: list(t) for r, t in c.list_pages.items()},
                "unauthorized": c.unauthorized,
                "binds_by_agent": dict(c.binds_by_agent),
                "leases": {f"{k[0]}/{k[1]}": v.get("spec", {}) for k, v in c.leases.items()},
                "lease_conflicts": c.lease_conflicts,
                "lease_written_at": dict(c.lease_written_at),
                "last_bind_at_by_agent": dict(c.last_bind_at_by_agent),
                "now": time.monotonic(),
                # Pods deleted with a grace that have not gone yet.
                "terminating": sum(1 for o in c.objects["pods"].values()
                                   if o["metadata"].get("deletionTimestamp")),
                "deletes": dict(c.deletes),
                "deletes_with_uid": dict(c.deletes_with_uid),
                "pods": {f"{k[0]}/{k[1]}": {"node": o.get("spec", {}).get("nodeName", ""),
                                             "uid": o["metadata"]["uid"],
                                             "conditions": o.get("status", {}).get("conditions", []),
                                             "deleting": bool(o["metadata"].get("deletionTimestamp")),
                                             "nominatedNodeName": o.get("status", {}).get("nominatedNodeName")}
                         for k, o in c.objects["pods"].items()},
            }


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--tls-cert")
    p.add_argument("--tls-key")
    p.add_argument("--client-ca")
    p.add_argument("--token-file")
    args = p.parse_args()
    Handler.cluster = Cluster()
    Handler.cluster.token_file = args.token_file
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True
    if args.tls_cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.tls_cert, args.tls_key)
        if args.client_ca:
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(args.client_ca)
        # The handshake runs in the connection's thread, on its first read.
        server.socket = ctx.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
    host, port = server.server_address[:2]
    print(f"fake-apiserver listening on {host}:{port}", file=sys.stderr, flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
