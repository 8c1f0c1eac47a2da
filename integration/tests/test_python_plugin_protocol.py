#!/usr/bin/python3
"""The Python plugin alone, driven over a real gRPC channel on a unix socket by a
small client that plays the scheduler's side of Plugin.Run."""

import queue
import threading

import podium_testlib as lib

STREAM_TIMEOUT = 10  # Seconds to wait for one answer.


class PluginStream:
    """The scheduler's side of one Run stream: send() queues a message, recv()
    waits for the next answer (None on timeout)."""

    def __init__(self, address):
        import grpc
        from podium.v1 import plugin_pb2_grpc
        self.grpc = grpc
        self.channel = grpc.insecure_channel(address)
        grpc.channel_ready_future(self.channel).result(timeout=STREAM_TIMEOUT)
        self._out = queue.Queue()
        self._in = queue.Queue()
        self._calls = plugin_pb2_grpc.PluginStub(self.channel).Run(self._requests())
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _requests(self):
        while True:
            msg = self._out.get()
            if msg is None:
                return
            yield msg

    def _read(self):
        try:
            for answer in self._calls:
                self._in.put(answer)
            self._in.put(("closed", None))
        except self.grpc.RpcError as e:
            self._in.put(("closed", e))

    def send(self, msg):
        self._out.put(msg)

    def recv(self, timeout=STREAM_TIMEOUT):
        try:
            item = self._in.get(timeout=timeout)
        except queue.Empty:
            return None
        if isinstance(item, tuple):
            self._in.put(item)  # Sticky: later recv() see the close too.
            raise ConnectionError(f"stream closed: {item[1]}")
        return item

    def close(self):
        self._out.put(None)
        self._calls.cancel()
        self.channel.close()


class PluginProtocolTest(lib.IntegrationTest):
    def setUp(self):
        super().setUp()
        from podium.v1 import objects_pb2, plugin_pb2
        self.pb = plugin_pb2
        self.obj = objects_pb2
        self.streams = []

    def tearDown(self):
        for s in self.streams:
            s.close()
        super().tearDown()

    # -- helpers ---------------------------------------------------------------
    def connect(self, misbehave=None, plugins=(("PreferZone", ""), ("DenyLabel", "")),
                expect_error=False):
        if not hasattr(self, "address"):
            self.address = self.start_plugin(misbehave=misbehave)
        s = PluginStream(self.address)
        self.streams.append(s)
        s.send(self.pb.SchedulerToPlugin(id=1, open=self.pb.Open(
            protocol_version=1, scheduler_id="test",
            plugins=[self.pb.PluginArgs(name=n, args_json=a) for n, a in plugins])))
        answer = s.recv()
        self.assertIsNotNone(answer, "no answer to Open")
        self.assertEqual(answer.id, 1)
        self.assertEqual(answer.WhichOneof("kind"), "registration")
        if not expect_error:
            self.assertEqual(answer.registration.error, "")
        return s, answer.registration

    def node(self, node_id, name, zone, maintenance=False):
        n = self.obj.Node()
        n.meta.name = name
        n.meta.uid = f"uid-{name}"
        n.meta.labels["topology.kubernetes.io/zone"] = zone
        if maintenance:
            n.meta.labels["podium.dev/maintenance"] = "true"
        return self.pb.MirroredNode(id=node_id, node=n)

    def pod(self, zone=None):
        p = self.obj.Pod()
        p.meta.name = "p"
        p.meta.namespace = "default"
        p.meta.uid = "uid-p"
        if zone:
            p.meta.annotations["podium.dev/preferred-zone"] = zone
        return p

    def reset_delta(self):
        return self.pb.StateDelta(reset=True, generation=1, node_upserts=[
            self.node(1, "a1", "a"), self.node(2, "b1", "b"),
            self.node(3, "m1", "a", maintenance=True), self.node(4, "a2", "a")])

    def cycle(self, s, req_id, delta=None, zone="a", filters=("DenyLabel",),
              scores=("PreferZone",), all_nodes=True, start=0, node_ids=(), find=0):
        msg = self.pb.SchedulerToPlugin(id=req_id, cycle=self.pb.CycleRequest(
            cycle_id=req_id, pod=self.pod(zone), profile="default-scheduler",
            filter_plugins=list(filters), score_plugins=list(scores),
            nodes=self.pb.NodeSet(all_nodes=all_nodes, start_index=start,
                                  node_ids=list(node_ids)),
            num_feasible_to_find=find))
        if delta is not None:
            msg.delta.CopyFrom(delta)
        s.send(msg)

    def answer(self, s, req_id, kind="cycle"):
        a = s.recv()
        self.assertIsNotNone(a, f"no answer to request {req_id}")
        self.assertEqual(a.id, req_id)
        self.assertEqual(a.WhichOneof("kind"), kind, a)
        return getattr(a, kind)

    # -- the contract ----------------------------------------------------------
    def test_registration(self):
        _, reg = self.connect()
        self.assertEqual(reg.protocol_version, 1)
        self.assertTrue(reg.mirror.nodes)
        by_name = {p.name: p for p in reg.plugins}
        self.assertEqual(sorted(by_name), ["DenyLabel", "PreferZone"])
        self.assertEqual(list(by_name["PreferZone"].extension_points), [self.pb.SCORE])
        self.assertEqual(list(by_name["DenyLabel"].extension_points), [self.pb.FILTER])
        ev = by_name["DenyLabel"].events
        self.assertEqual(len(ev), 1)
        self.assertEqual(ev[0].resource, self.pb.NODE)
        self.assertTrue(ev[0].action_mask & self.pb.UPDATE_NODE_LABEL)

    def test_bad_args_refuse_open(self):
        _, reg = self.connect(plugins=[("DenyLabel", '{"lable": "x"}')], expect_error=True)
        self.assertIn("DenyLabel", reg.error)
        self.assertIn("lable", reg.error)

    def test_unknown_plugin_refuses_open(self):
        _, reg = self.connect(plugins=[("NoSuchPlugin", "")], expect_error=True)
        self.assertIn("NoSuchPlugin", reg.error)

    def test_args_change_behaviour(self):
        s, _ = self.connect(plugins=[("DenyLabel",
                                      '{"label": "topology.kubernetes.io/zone", "value": "b",'
                                      ' "reason": "zone b is closed"}')])
        self.cycle(s, 2, delta=self.reset_delta(), scores=())
        r = self.answer(s, 2)
        self.assertEqual(list(r.feasible), [1, 3, 4])
        self.assertEqual([(x.node_id, list(x.status.reasons)) for x in r.rejected],
                         [(2, ["zone b is closed"])])

    def test_filter_and_score_in_one_round_trip(self):
        s, _ = self.connect()
        self.cycle(s, 7, delta=self.reset_delta(), zone="b", start=1)
        r = self.answer(s, 7)
        # all_nodes from start_index 1: ids 2, 3, 4, 1; node 3 is in maintenance.
        self.assertEqual(list(r.feasible), [2, 4, 1])
        self.assertEqual(r.nodes_evaluated, 4)
        self.assertEqual(len(r.rejected), 1)
        rej = r.rejected[0]
        self.assertEqual(rej.node_id, 3)
        self.assertEqual(rej.status.code, self.pb.Status.UNSCHEDULABLE)
        self.assertEqual(list(rej.status.reasons), ["node(s) are under maintenance"])
        self.assertEqual(rej.status.plugin, "DenyLabel")
        self.assertEqual(len(r.scores), 1)
        self.assertEqual(r.scores[0].plugin, "PreferZone")
        self.assertEqual(list(r.scores[0].scores), [100, 0, 0])  # Aligned with feasible.

    def test_num_feasible_to_find(self):
        s, _ = self.connect()
        self.cycle(s, 2, delta=self.reset_delta(), find=2, start=2)
        r = self.answer(s, 2)
        # Order 3, 4, 1, 2: 3 rejected, 4 and 1 pass, then stop.
        self.assertEqual(list(r.feasible), [4, 1])
        self.assertEqual(r.nodes_evaluated, 3)
        self.assertEqual(list(r.scores[0].scores), [100, 100])

    def test_score_only_with_node_ids(self):
        s, _ = self.connect()
        self.cycle(s, 2, delta=self.reset_delta(), filters=(), all_nodes=False,
                   node_ids=(4, 2, 1), zone="b")
        r = self.answer(s, 2)
        self.assertEqual(list(r.feasible), [])
        self.assertEqual(list(r.scores[0].scores), [0, 100, 0])  # Aligned with node_ids.

    def test_pod_without_preference_scores_zero(self):
        s, _ = self.connect()
        self.cycle(s, 2, delta=self.reset_delta(), zone=None)
        r = self.answer(s, 2)
        self.assertEqual(list(r.scores[0].scores), [0, 0, 0])

    def test_delta_applies_before_the_request_it_rides_with(self):
        s, _ = self.connect()
        self.cycle(s, 2, delta=self.reset_delta(), scores=())
        self.assertEqual(list(self.answer(s, 2).feasible), [1, 2, 4])
        # Node 3 leaves maintenance, node 1 is removed, node 9 is added: same message.
        d = self.pb.StateDelta(generation=2, node_removals=[1],
                               node_upserts=[self.node(3, "m1", "a"), self.node(9, "c1", "c")])
        self.cycle(s, 3, delta=d, scores=())
        self.assertEqual(list(self.answer(s, 3).feasible), [2, 3, 4, 9])
        # A delta with id 0 carries state only and is not answered.
        s.send(self.pb.SchedulerToPlugin(id=0, delta=self.pb.StateDelta(
            generation=3, node_upserts=[self.node(2, "b1", "b", maintenance=True)])))
        self.cycle(s, 4, scores=())
        self.assertEqual(list(self.answer(s, 4).feasible), [3, 4, 9])
        # reset replaces everything.
        self.cycle(s, 5, delta=self.pb.StateDelta(reset=True, generation=4,
                                                  node_upserts=[self.node(5, "z", "z")]),
                   scores=())
        self.assertEqual(list(self.answer(s, 5).feasible), [5])

    def test_a_full_state_larger_than_grpc_default_limit_is_taken(self):
        # 5 000 nodes with a 1 KiB annotation each: a reset of ~5.5 MiB in one
        # message, over gRPC's default receive limit of 4 MiB.
        s, _ = self.connect()
        nodes = []
        for i in range(1, 5001):
            n = self.node(i, f"n{i}", "a")
            n.node.meta.annotations["example.com/blob"] = "x" * 1024
            nodes.append(n)
        delta = self.pb.StateDelta(reset=True, generation=1, node_upserts=nodes)
        self.assertGreater(delta.ByteSize(), 4 * 1024 * 1024)
        self.cycle(s, 2, delta=delta, scores=(), find=3)
        self.assertEqual(list(self.answer(s, 2).feasible), [1, 2, 3])

    def test_requests_in_flight_answered_by_id(self):
        s, _ = self.connect()
        s.send(self.pb.SchedulerToPlugin(id=0, delta=self.reset_delta()))
        for i, zone in ((10, "a"), (11, "b"), (12, "a")):
            self.cycle(s, i, zone=zone, filters=())
        got = {}
        for _ in range(3):
            a = s.recv()
            self.assertIsNotNone(a)
            got[a.id] = list(a.cycle.scores[0].scores)
        self.assertEqual(got, {10: [100, 0, 100, 100], 11: [0, 100, 0, 0],
                               12: [100, 0, 100, 100]})

    def test_unknown_node_id_is_an_error(self):
        s, _ = self.connect()
        self.cycle(s, 2, delta=self.reset_delta(), all_nodes=False, node_ids=(1, 42))
        a = s.recv()
        self.assertEqual(a.id, 2)
        self.assertEqual(a.WhichOneof("kind"), "error")
        self.assertIn("42", a.error)

    def test_hold_at_permit_waits_for_annotated_pods_only(self):
        s, reg = self.connect(plugins=[("HoldAtPermit", "")])
        self.assertEqual([list(p.extension_points) for p in reg.plugins], [[self.pb.PERMIT]])
        held = self.pod()
        held.meta.annotations["podium.dev/hold-at-permit"] = "2.5"
        bad = self.pod()
        bad.meta.annotations["podium.dev/hold-at-permit"] = "soon"
        for req_id, pod in ((2, held), (3, self.pod()), (4, bad)):
            s.send(self.pb.SchedulerToPlugin(id=req_id, permit=self.pb.PermitRequest(
                cycle_id=1, pod=pod, node_name="a1", plugins=["HoldAtPermit"])))
        answers = {}
        for _ in range(3):
            a = s.recv()
            self.assertEqual(a.WhichOneof("kind"), "permit", a)
            answers[a.id] = a.permit.results[0]
        self.assertEqual((answers[2].status.code, answers[2].timeout_ms), (self.pb.Status.WAIT, 2500))
        self.assertEqual(answers[3].status.code, self.pb.Status.SUCCESS)
        self.assertEqual(answers[4].status.code, self.pb.Status.UNSCHEDULABLE_AND_UNRESOLVABLE)
        self.assertIn("podium.dev/hold-at-permit", answers[4].status.reasons[0])
        self.assertEqual({r.plugin for r in answers.values()}, {"HoldAtPermit"})

    def test_unknown_request_kind_is_answered_with_error(self):
        s, _ = self.connect()
        s.send(self.pb.SchedulerToPlugin(id=5, reserve=self.pb.ReserveRequest(
            cycle_id=1, pod=self.pod(), node_name="a1", plugins=["PreferZone"])))
        a = s.recv()
        self.assertEqual(a.id, 5)
        self.assertEqual(a.WhichOneof("kind"), "error")
        self.assertIn("reserve", a.error)
        # An unserved plugin in a cycle request, too; the stream keeps working.
        self.cycle(s, 6, delta=self.reset_delta(), filters=("NodeResourcesFit",))
        a = s.recv()
        self.assertEqual((a.id, a.WhichOneof("kind")), (6, "error"))
        self.assertIn("NodeResourcesFit", a.error)
        self.cycle(s, 7)
        self.answer(s, 7)

    def test_dry_run_filter_and_queueing_hint(self):
        s, _ = self.connect()
        s.send(self.pb.SchedulerToPlugin(id=3, delta=self.reset_delta(),
                                         dry_run_filter=self.pb.DryRunFilterRequest(
                                             cycle_id=1, pod=self.pod(),
                                             filter_plugins=["DenyLabel"], node_id=3)))
        r = self.answer(s, 3, "dry_run_filter")
        self.assertEqual(r.status.code, self.pb.Status.UNSCHEDULABLE)
        ev = self.pb.ClusterEvent(resource=self.pb.NODE, action=self.pb.UPDATE_NODE_LABEL,
                                  new_node=self.node(3, "m1", "a").node)
        s.send(self.pb.SchedulerToPlugin(id=4, queueing_hint=self.pb.QueueingHintRequest(
            event=ev, queries=[self.pb.HintQuery(plugin="DenyLabel", pods=[self.pod()])])))
        h = self.answer(s, 4, "queueing_hint")
        self.assertEqual(list(h.answers[0].queue), [True])

    def test_each_stream_has_its_own_mirror(self):
        s1, _ = self.connect()
        self.cycle(s1, 2, delta=self.reset_delta(), scores=())
        self.answer(s1, 2)
        s2, _ = self.connect()
        self.cycle(s2, 2, scores=())  # No delta yet on this stream: no nodes.
        self.assertEqual(list(self.answer(s2, 2).feasible), [])

    # -- misbehaviour (the other side of the bad-input tests) ------------------
    def test_misbehave_score_out_of_range(self):
        s, _ = self.connect(misbehave="score-out-of-range")
        self.cycle(s, 2, delta=self.reset_delta())
        r = self.answer(s, 2)
        self.assertTrue(all(x == 1000 for x in r.scores[0].scores))

    def test_misbehave_unknown_node(self):
        s, _ = self.connect(misbehave="unknown-node")
        self.cycle(s, 2, delta=self.reset_delta())
        r = self.answer(s, 2)
        self.assertTrue(set(r.feasible) - {1, 2, 3, 4})
        self.assertEqual(len(r.scores[0].scores), len(r.feasible))
        self.cycle(s, 3, filters=(), all_nodes=False, node_ids=(1, 2))
        self.assertEqual(len(self.answer(s, 3).scores[0].scores), 3)

    def test_misbehave_hang(self):
        s, _ = self.connect(misbehave="hang")
        self.cycle(s, 2, delta=self.reset_delta())
        self.assertIsNone(s.recv(timeout=1))

    def test_misbehave_crash_after(self):
        s, _ = self.connect(misbehave="crash-after=1")
        self.cycle(s, 2, delta=self.reset_delta())
        self.answer(s, 2)
        self.cycle(s, 3)
        with self.assertRaises(ConnectionError):
            s.recv()
        self.assertEqual(self.plugin_process.wait(10), 3)


if __name__ == "__main__":
    lib.main()
