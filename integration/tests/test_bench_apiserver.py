#!/usr/bin/python3
"""podium-bench-apiserver (make bench's C++ fake kube-apiserver) keeps the API
conventions the adapter relies on, and bench_adapter.py through it binds every
pod exactly once with at most 2 API requests per pod besides events.

  /usr/bin/python3 test_bench_apiserver.py --build BUILD --repo SRC --stubs BUILD/python
"""

import http.client
import json
import os
import re
import subprocess
import sys
import time
import unittest

import podium_testlib as lib


class BenchApiserverTest(unittest.TestCase):
    BUILD = None

    def setUp(self):
        binary = os.path.join(self.BUILD, "integration", "podium-bench-apiserver")
        self.assertTrue(os.path.exists(binary), binary)
        self.proc = subprocess.Popen([binary, "--port", "0"], stderr=subprocess.PIPE, text=True)
        line = self.proc.stderr.readline()
        m = re.search(r"listening on ([\d.]+):(\d+)", line)
        self.assertIsNotNone(m, line)
        self.host, self.port = m.group(1), int(m.group(2))

    def tearDown(self):
        self.proc.kill()
        self.proc.wait()
        self.proc.stderr.close()

    def call(self, method, path, body=None, ctype="application/json"):
        c = http.client.HTTPConnection(self.host, self.port, timeout=30)
        c.request(method, path, body=json.dumps(body) if body is not None else None,
                  headers={"Content-Type": ctype})
        r = c.getresponse()
        data = json.loads(r.read() or b"null")
        c.close()
        return r.status, data

    def test_api_conventions(self):
        nodes = [{"kind": "Node", "metadata": {"name": f"n{i}"}} for i in range(5)]
        pods = [{"kind": "Pod", "metadata": {"name": f"p{i}", "namespace": "ns"}, "spec": {"containers": []}}
                for i in range(3)]
        code, out = self.call("POST", "/control/objects", {"objects": nodes + pods})
        self.assertEqual(out["results"], [201] * 8)

        # Paged list over one snapshot, with the list's resourceVersion.
        names, token, rvs = [], None, set()
        while True:
            code, page = self.call("GET", "/api/v1/nodes?limit=2" + (f"&continue={token}" if token else ""))
            self.assertEqual(code, 200)
            self.assertEqual(page["kind"], "NodeList")
            names += [n["metadata"]["name"] for n in page["items"]]
            rvs.add(page["metadata"]["resourceVersion"])
            token = page["metadata"].get("continue")
            if not token:
                break
        self.assertEqual(names, [f"n{i}" for i in range(5)])
        self.assertEqual(len(rvs), 1)
        self.assertEqual(self.call("GET", "/api/v1/nodes?limit=2&continue=nope:2")[0], 410)
        self.assertEqual(self.call("GET", "/api/v1/pods?fieldSelector=status.phase%3DRunning")[0], 400)
        self.assertEqual(self.call("GET", "/apis/scheduling.k8s.io/v1/priorityclasses")[0], 404)
        list_rv = rvs.pop()

        # Bind: the pod gets its node; a second bind is a 409 and no double bind.
        _, pod = self.call("GET", "/api/v1/namespaces/ns/pods/p0")
        uid = pod["metadata"]["uid"]
        self.assertEqual(pod["status"]["phase"], "Pending")
        code, _ = self.call("POST", "/api/v1/namespaces/ns/pods/p0/binding",
                            {"metadata": {"uid": uid}, "target": {"name": "n1"}})
        self.assertEqual(code, 201)
        code, _ = self.call("POST", "/api/v1/namespaces/ns/pods/p0/binding",
                            {"metadata": {"uid": uid}, "target": {"name": "n2"}})
        self.assertEqual(code, 409)
        code, _ = self.call("POST", "/api/v1/namespaces/ns/pods/p1/binding",
                            {"metadata": {"uid": "other"}, "target": {"name": "n2"}})
        self.assertEqual(code, 409)
        _, pod = self.call("GET", "/api/v1/namespaces/ns/pods/p0")
        self.assertEqual(pod["spec"]["nodeName"], "n1")
        self.assertEqual([c["type"] for c in pod["status"]["conditions"]], ["PodScheduled"])
        _, assigned = self.call("GET", "/api/v1/pods?fieldSelector=spec.nodeName%21%3D")
        _, pending = self.call("GET", "/api/v1/pods?fieldSelector=spec.nodeName%3D")
        self.assertEqual([p["metadata"]["name"] for p in assigned["items"]], ["p0"])
        self.assertEqual([p["metadata"]["name"] for p in pending["items"]], ["p1", "p2"])

        # Status patch (strategic merge: conditions by type; null removes).
        code, pod = self.call("PATCH", "/api/v1/namespaces/ns/pods/p1/status",
                              {"status": {"nominatedNodeName": "n3", "conditions": [
                                  {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}},
                              "application/strategic-merge-patch+json")
        self.assertEqual(code, 200)
        self.assertEqual(pod["status"]["nominatedNodeName"], "n3")
        code, pod = self.call("PATCH", "/api/v1/namespaces/ns/pods/p1/status",
                              {"status": {"nominatedNodeName": None}}, "application/merge-patch+json")
        self.assertNotIn("nominatedNodeName", pod["status"])
        self.assertEqual(pod["status"]["conditions"][0]["reason"], "Unschedulable")
        self.assertEqual(self.call("PATCH", "/api/v1/namespaces/ns/pods/p1/status", {}, "text/plain")[0], 415)

        # Delete with the uid precondition.
        self.assertEqual(self.call("DELETE", "/api/v1/namespaces/ns/pods/p2",
                                   {"preconditions": {"uid": "wrong"}})[0], 409)
        self.assertEqual(self.call("DELETE", "/api/v1/namespaces/ns/pods/p2", {})[0], 200)
        self.assertEqual(self.call("GET", "/api/v1/namespaces/ns/pods/p2")[0], 404)

        # The watch from the list's version replays every change in order, then ends.
        c = http.client.HTTPConnection(self.host, self.port, timeout=30)
        c.request("GET", f"/api/v1/pods?watch=1&resourceVersion={list_rv}&timeoutSeconds=1")
        r = c.getresponse()
        self.assertEqual(r.status, 200)
        events = [json.loads(line) for line in r.read().decode().splitlines() if line]
        c.close()
        self.assertEqual([(e["type"], e["object"]["metadata"]["name"]) for e in events],
                         [("MODIFIED", "p0"), ("MODIFIED", "p1"), ("MODIFIED", "p1"), ("DELETED", "p2")])

        # Leases: create, conflicting and current updates.
        lease = {"metadata": {"name": "podium"}, "spec": {"holderIdentity": "a"}}
        code, made = self.call("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases", lease)
        self.assertEqual(code, 201)
        self.assertEqual(self.call("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases", lease)[0], 409)
        stale = {"metadata": {"name": "podium", "resourceVersion": "1"}, "spec": {"holderIdentity": "b"}}
        self.assertEqual(self.call("PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/podium",
                                   stale)[0], 409)
        self.assertEqual(self.call("PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/podium",
                                   made)[0], 200)

        _, stats = self.call("GET", "/control/stats")
        self.assertEqual(stats["double_binds"], 0)
        self.assertEqual(stats["bind_conflicts"], 2)
        self.assertEqual(stats["requests"]["POST bind"], 3)
        self.assertEqual(stats["requests"]["GET watch"], 1)
        self.assertEqual(stats["bound"], 1)

    def test_bench_through_the_adapter_binds_every_pod_once(self):
        out = subprocess.run([lib.PYTHON, os.path.join(lib.Flags.repo, "integration", "fake_apiserver", "bench_adapter.py"),
                              "--build", self.BUILD, "--workload", "smoke", "--timeout", "90"],
                             capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr[-3000:])
        result = json.loads(out.stdout)
        self.assertEqual(result["apiserver"], "cpp")
        self.assertEqual(result["double_binds"], 0)
        self.assertEqual(result["requests"]["POST bind"], 200)
        self.assertLessEqual(result["api_requests_per_pod"], 2)

    def test_startup_bench_binds_only_the_pending_pods(self):
        # The start-up shape (issue 8): running pods are in the API before Podium
        # starts; only the pending ones are bound, each once.
        out = subprocess.run([lib.PYTHON, os.path.join(lib.Flags.repo, "integration", "fake_apiserver", "bench_adapter.py"),
                              "--build", self.BUILD, "--workload", "startup-smoke", "--timeout", "90"],
                             capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr[-3000:])
        result = json.loads(out.stdout)
        self.assertEqual((result["running_pods"], result["pending_pods"]), (200, 20))
        self.assertEqual(result["requests"]["POST bind"], 20)
        self.assertEqual(result["double_binds"], 0)
        self.assertLessEqual(result["seconds_to_processes_ready"], result["seconds_to_first_bind"])
        self.assertLessEqual(result["seconds_to_first_bind"], result["seconds_to_all_bound"])


if __name__ == "__main__":
    BenchApiserverTest.BUILD = lib.take_flag("--build")
    lib.main()
