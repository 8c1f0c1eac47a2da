"""deploy/kubernetes renders with `kubectl kustomize` into the sidecar set the
README describes, with no more RBAC than kube-scheduler's system:kube-scheduler.

Run by ctest as /usr/bin/python3 test_deploy_manifests.py --repo SRC.
"""

import os
import shutil
import subprocess
import sys
import unittest

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# system:kube-scheduler (Kubernetes' bootstrap policy): (group, resource) ->
# verbs, and the resourceNames-restricted ones (lease/endpoint names differ per
# scheduler; ours is "podium", in its own namespace).
KUBE_SCHEDULER = {
    ("", "events"): {"create", "patch", "update"},
    ("events.k8s.io", "events"): {"create", "patch", "update"},
    ("coordination.k8s.io", "leases"): {"create", "get", "update"},
    ("", "endpoints"): {"create", "get", "update"},
    ("", "nodes"): {"get", "list", "watch"},
    ("", "pods"): {"delete", "get", "list", "watch"},
    ("", "bindings"): {"create"},
    ("", "pods/binding"): {"create"},
    ("", "pods/status"): {"patch", "update"},
    ("", "replicationcontrollers"): {"get", "list", "watch"},
    ("", "services"): {"get", "list", "watch"},
    ("apps", "replicasets"): {"get", "list", "watch"},
    ("apps", "statefulsets"): {"get", "list", "watch"},
    ("policy", "poddisruptionbudgets"): {"get", "list", "watch"},
    ("", "persistentvolumeclaims"): {"get", "list", "watch"},
    ("", "persistentvolumes"): {"get", "list", "watch"},
    ("", "namespaces"): {"get", "list", "watch"},
    ("storage.k8s.io", "csinodes"): {"get", "list", "watch"},
    # Gangs: Kubernetes' GenericWorkload PodGroups (1.35+) and what
    # scheduler-plugins' Coscheduling grants its scheduler.
    ("scheduling.k8s.io", "podgroups"): {"get", "list", "watch"},
    ("scheduling.k8s.io", "workloads"): {"get", "list", "watch"},
    ("scheduling.x-k8s.io", "podgroups"): {"get", "list", "watch"},
}


class DeployManifestsTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        kubectl = shutil.which("kubectl")
        if kubectl is None:
            raise AssertionError("kubectl is not installed: it renders the manifests")
        out = subprocess.run([kubectl, "kustomize", os.path.join(REPO, "deploy", "kubernetes")],
                             capture_output=True, text=True, timeout=60)
        if out.returncode != 0:
            raise AssertionError(f"kubectl kustomize failed:\n{out.stderr}")
        cls.docs = [d for d in yaml.safe_load_all(out.stdout) if d]
        cls.by_kind = {}
        for d in cls.docs:
            cls.by_kind.setdefault(d["kind"], []).append(d)

    def one(self, kind):
        self.assertEqual(len(self.by_kind.get(kind, [])), 1, kind)
        return self.by_kind[kind][0]

    def test_sidecar_set_shares_unix_sockets(self):
        dep = self.one("Deployment")
        self.assertEqual(dep["metadata"]["namespace"], "podium-system")
        self.assertEqual(dep["spec"]["replicas"], 2)
        pod = dep["spec"]["template"]["spec"]
        containers = {c["name"]: c for c in pod["containers"]}
        self.assertEqual(set(containers), {"scheduler", "plugin-host", "k8s-adapter"})
        volumes = {v["name"]: v for v in pod["volumes"]}
        self.assertIn("emptyDir", volumes["sockets"])
        for c in containers.values():
            self.assertIn({"name": "sockets", "mountPath": "/run/podium"}, c["volumeMounts"], c["name"])
            self.assertIn("cpu", c["resources"]["requests"], c["name"])
            self.assertIn("memory", c["resources"]["requests"], c["name"])
        args = {n: c["args"] for n, c in containers.items()}
        self.assertIn("--listen=unix:///run/podium/scheduler.sock", args["scheduler"])
        self.assertIn("--scheduler=unix:///run/podium/scheduler.sock", args["k8s-adapter"])
        self.assertIn("--leader-elect", args["k8s-adapter"])
        self.assertIn("--leader-elect-resource-namespace=podium-system", args["k8s-adapter"])
        self.assertIn("--listen=unix:///run/podium/host.sock", args["plugin-host"])
        self.assertIn("livenessProbe", containers["scheduler"])
        self.assertIn("readinessProbe", containers["scheduler"])
        self.assertEqual(pod["serviceAccountName"], "podium")

    def test_metrics_ports_are_exposed(self):
        # Each process that serves /metrics listens beyond loopback on a named
        # container port, and the Service publishes every one of them.
        dep = self.one("Deployment")
        template = dep["spec"]["template"]
        containers = {c["name"]: c for c in template["spec"]["containers"]}
        served = {}
        for name, port_name, flag in (("scheduler", "metrics", "--metrics-address"),
                                      ("k8s-adapter", "adapter-metrics", "--metrics-address")):
            c = containers[name]
            address = [a.split("=", 1)[1] for a in c["args"] if a.startswith(flag + "=")]
            self.assertEqual(len(address), 1, f"{name}: {flag}")
            host, port = address[0].rsplit(":", 1)
            self.assertEqual(host, "0.0.0.0", f"{name} serves metrics on loopback only")
            ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
            self.assertEqual(ports.get(port_name), int(port), name)
            served[port_name] = int(port)
        annotations = template["metadata"].get("annotations", {})
        self.assertEqual(annotations.get("prometheus.io/scrape"), "true")
        self.assertEqual(annotations.get("prometheus.io/port"), str(served["metrics"]))
        service = self.one("Service")
        self.assertEqual(service["metadata"]["namespace"], "podium-system")
        selector = service["spec"]["selector"]
        for k, v in selector.items():
            self.assertEqual(template["metadata"]["labels"].get(k), v, "the Service selects the pods")
        by_name = {p["name"]: p for p in service["spec"]["ports"]}
        self.assertEqual(set(by_name), set(served))
        for name, port in served.items():
            self.assertEqual(by_name[name]["targetPort"], name)
            self.assertEqual(by_name[name]["port"], port)

    def test_access_control_is_on_with_per_pod_tokens(self):
        """The tokens the init container makes reach the scheduler and the
        adapter only (test_authn.py runs the script and the flags)."""
        pod = self.one("Deployment")["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in pod["volumes"]}
        self.assertEqual(volumes["credentials"]["emptyDir"].get("medium"), "Memory")
        init = {c["name"]: c for c in pod["initContainers"]}
        self.assertIn({"name": "credentials", "mountPath": "/var/run/podium-credentials"},
                      init["credentials"]["volumeMounts"])
        containers = {c["name"]: c for c in pod["containers"]}
        mount = {"name": "credentials", "mountPath": "/var/run/podium-credentials", "readOnly": True}
        self.assertIn(mount, containers["scheduler"]["volumeMounts"])
        self.assertIn(mount, containers["k8s-adapter"]["volumeMounts"])
        self.assertNotIn("credentials", [m["name"] for m in containers["plugin-host"]["volumeMounts"]])
        self.assertIn("--token-auth-file=/var/run/podium-credentials/tokens.csv", containers["scheduler"]["args"])
        self.assertIn("--adapter-identity=podium-adapter", containers["scheduler"]["args"])
        self.assertIn("--scheduler-token-file=/var/run/podium-credentials/adapter.token",
                      containers["k8s-adapter"]["args"])

    def test_config_map_is_the_scheduler_configuration(self):
        dep = self.one("Deployment")
        cm = self.one("ConfigMap")
        volumes = {v["name"]: v for v in dep["spec"]["template"]["spec"]["volumes"]}
        self.assertEqual(volumes["config"]["configMap"]["name"], cm["metadata"]["name"])
        config = list(yaml.safe_load_all(cm["data"]["scheduler.yaml"]))
        self.assertEqual([p["schedulerName"] for p in config[0]["profiles"]], ["podium"])
        self.assertEqual(config[1]["pluginEndpoints"][0]["address"], "unix:///run/podium/host.sock")
        scheduler = [c for c in dep["spec"]["template"]["spec"]["containers"] if c["name"] == "scheduler"][0]
        self.assertIn("--config=/etc/podium/scheduler.yaml", scheduler["args"])

    def test_rbac_is_no_more_than_kube_schedulers(self):
        granted = {}
        for role in self.by_kind["ClusterRole"] + self.by_kind["Role"]:
            for rule in role["rules"]:
                for group in rule["apiGroups"]:
                    for resource in rule["resources"]:
                        granted.setdefault((group, resource), set()).update(rule["verbs"])
        for key, verbs in granted.items():
            self.assertIn(key, KUBE_SCHEDULER, f"{key} is not granted to kube-scheduler")
            self.assertLessEqual(verbs, KUBE_SCHEDULER[key], key)
        # What the adapter needs.
        for key, verbs in {("", "pods/binding"): {"create"}, ("", "pods"): {"list", "watch", "delete"},
                           ("", "nodes"): {"list", "watch"}, ("", "pods/status"): {"patch"},
                           ("events.k8s.io", "events"): {"create", "patch"},  # patch: event series
                           ("scheduling.k8s.io", "workloads"): {"list", "watch"},
                           ("scheduling.k8s.io", "podgroups"): {"list", "watch"},
                           ("scheduling.x-k8s.io", "podgroups"): {"list", "watch"},
                           ("", "namespaces"): {"list", "watch"},
                           ("coordination.k8s.io", "leases"): {"create", "get", "update"}}.items():
            self.assertLessEqual(verbs, granted.get(key, set()), key)
        lease_role = self.one("Role")
        self.assertEqual(lease_role["metadata"]["namespace"], "podium-system")
        named = [r for r in lease_role["rules"] if r.get("resourceNames")]
        self.assertEqual(named[0]["resourceNames"], ["podium"])
        binding = self.one("ClusterRoleBinding")
        self.assertEqual(binding["subjects"][0]["name"], "podium")

    def test_example_workload_asks_for_podium(self):
        with open(os.path.join(REPO, "deploy", "kubernetes", "examples", "podium-pod.yaml")) as f:
            example = yaml.safe_load(f)
        self.assertEqual(example["spec"]["template"]["spec"]["schedulerName"], "podium")


if __name__ == "__main__":
    argv = [a for a in sys.argv[1:] if a != "--"]
    if "--repo" in argv:
        i = argv.index("--repo")
        REPO = argv[i + 1]
        del argv[i:i + 2]
    unittest.main(argv=[sys.argv[0]] + argv, verbosity=2)
