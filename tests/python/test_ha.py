"""Several real drift-sentinel processes on one real PostgreSQL store: the writer lease, fencing,
shards, and the two store backends answering alike.

* Failover: a standby takes over when the writer is SIGKILLed (under load, losing nothing); a
  writer paused past its lease is fenced, commits nothing and stands by; a writer paused inside a
  commit does not keep the lease row locked; a replica that lost the lease stops exporting the
  writer's gauges; renewing at a third of the ttl (the largest share allowed) never loses the
  lease; a replica whose database does not exist yet stands by until it does.
* Shards: each shard takes only its clusters while any shard's API shows the whole fleet; a
  sharded writer keeps its fleet drifts (filed under `fleet:<group>`) across a restart; a shard
  starting leaves another shard's pending notifications alone; a silence created through one
  shard withdraws the other shard's reminders of what it covers.
* Backends alike: an event PostgreSQL cannot store (a NUL in its id) is refused as on SQLite.

The tests share the run's throwaway PostgreSQL server (conftest.py's `pg`), a database each.
Deliveries go to a Standard Webhooks receiver that verifies signatures with the reference
`standardwebhooks` library. The failover test uses the shipped lease settings (store.lease
defaults) and writes the measured takeover times to test-output/ha-takeover.json (BENCHMARKS.md
quotes them)."""

import json
import signal
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from cloudevents.core.bindings.http import to_binary_event
from cloudevents.core.v1.event import CloudEvent

from conftest import ROOT, Sentinel, attributes, reserve_port, wait_for
from test_delivery_process import WHSEC, WebhookReceiver, config_map, edit
from test_fleet import autoscaler, with_key

OUTPUT = ROOT / "test-output"
FAST_LEASE = "  lease: {ttl: 3s, renewInterval: 1s, retryInterval: 200ms}\n"


class Replica(Sentinel):
    """A drift-sentinel process on a PostgreSQL store; it may start as a standby."""

    def __init__(self, workdir: Path, name: str, config: str):
        directory = workdir / name
        directory.mkdir()
        super().__init__(directory)
        self.name = name
        self.env = {"RUST_LOG": "info", "POD_NAME": name}
        self.config_path.write_text(config)

    def start(self, ready=True):
        """Started, and ready (the writer) or, with `ready=False`, answering /healthz."""
        return super().start("/readyz" if ready else "/healthz", timeout=30)

    def status(self, path: str):
        try:
            with urllib.request.urlopen(self.url + path, timeout=2) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()
        except (urllib.error.URLError, ConnectionError, OSError):
            return None, b""

    def ready(self) -> bool:
        return self.status("/readyz")[0] == 200

    def readiness(self) -> dict:
        """The readiness answer's JSON, or {} while the replica is ready (its body is
        `{"status": "ready"}`) or does not answer: a replica that was paused and resumed answers `ready` until
        its keeper notices the lost lease."""
        status, body = self.status("/readyz")
        if status != 503:
            return {}
        try:
            return json.loads(body)
        except ValueError:
            return {}

    def api(self, path: str):
        status, body = self.status(path)
        assert status == 200, (status, body)
        return json.loads(body)

    def send(self, event_id: str, verb: str, obj: dict, cluster="prod"):
        message = to_binary_event(CloudEvent(attributes(event_id, verb, obj, cluster=cluster), obj))
        try:
            return self.post(dict(message.headers), message.body)
        except (urllib.error.URLError, ConnectionError, OSError) as error:
            return None, {}, str(error).encode()


def config(url: str, lease: str = "", extra: str = "", hook_port: int = 0) -> str:
    channels = (
        "channels:\n"
        f"  - name: hook\n    type: webhook\n    url: http://127.0.0.1:{hook_port}/hook\n    secret: {WHSEC}\n"
        "    minBackoff: 200ms\n    maxBackoff: 1s\n    maxAttempts: 1000\n"
        "routes:\n  - channels: [hook]\n    groupWait: 0s\n    groupInterval: 0s\n    groupBy: [name]\n    repeatInterval: 0s\n"
        if hook_port else "channels:\n  - {name: log, type: log}\n"
    )
    return f"store:\n  url: \"{url}\"\n{lease}server:\n  drainTimeout: 5s\n{channels}{extra}"


def writer_and_standby(workdir, url, lease=FAST_LEASE, **options):
    """Replica a, the writer (ready), and replica b, its standby, on database `url`."""
    text = config(url, lease=lease, **options)
    return (Replica(workdir, "replica-a", text).start(),
            Replica(workdir, "replica-b", text).start(ready=False))


def drift_then_pause(writer, until=None):
    """One firing drift committed by `writer`, then (once `until()` holds, if given) the writer
    paused (SIGSTOP)."""
    base = config_map("config-before")
    assert writer.send("before-1", "add", base)[0] == 202
    assert writer.send("before-2", "update", edit(base, "max-scale", "7"))[0] == 202
    if until is not None:
        assert wait_for(until, timeout=10)
    writer.process.send_signal(signal.SIGSTOP)


def stop_all(*replicas):
    for replica in replicas:
        if replica.process is not None and replica.process.poll() is None:
            replica.process.kill()
            replica.process.wait(timeout=10)


def lease_losses(replica) -> float:
    metrics = replica.status("/metrics")[1].decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
               if line.startswith("drift_sentinel_writer_lease_losses_total{"))


def firing_gauge(replica) -> float:
    metrics = replica.status("/metrics")[1].decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
               if line.startswith("drift_sentinel_drifts_firing{"))


def create_silence(replica, matchers: dict, comment: str):
    request = urllib.request.Request(
        replica.url + "/api/v1/silences", method="POST",
        data=json.dumps({"matchers": matchers, "comment": comment}).encode(),
        headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=5) as response:
        assert response.status == 201


# How often the shard tests' writers read back the silences all shards share
# (`shard.silenceSyncInterval`, 5 s by default): what a test waits after creating a silence
# through another shard.
SILENCE_SYNC = "500ms"
SILENCE_READ_BACK = 0.5


class Load:
    """A steady stream of drifting ConfigMaps sent the way the Broker sends them: to a ready
    replica (the Kubernetes Service routes only there), retried until answered 202."""

    def __init__(self, replicas):
        self.replicas = replicas
        self.acknowledged = []  # (event id, object name, verb)
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def deliver(self, event_id, verb, obj):
        while not self.stopping.is_set() or verb == "update":
            for replica in self.replicas:
                if replica.process is None or replica.process.poll() is not None:
                    continue
                status, _, _ = replica.send(event_id, verb, obj)
                if status == 202:
                    self.acknowledged.append((event_id, obj["metadata"]["name"], verb))
                    return True
            time.sleep(0.1)
        return False

    def run(self):
        index = 0
        while not self.stopping.is_set():
            base = config_map(f"config-ha-{index:03d}")
            if self.deliver(f"ha-{index}-a", "add", base):
                self.deliver(f"ha-{index}-b", "update", edit(base, "max-scale", str(index + 2)))
            index += 1
            time.sleep(0.05)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.stopping.set()
        self.thread.join(timeout=60)


# ---- Failover and fencing ------------------------------------------------------------------------

def test_a_standby_takes_over_from_a_killed_writer_three_times_losing_nothing(pg, workdir):
    """SIGKILL the writer three times under load, with the shipped lease settings."""
    url = pg.database()
    receiver = WebhookReceiver().start()
    text = config(url, hook_port=receiver.port)
    a = Replica(workdir, "replica-a", text).start()
    b = Replica(workdir, "replica-b", text).start(ready=False)
    load = None
    takeovers = []
    try:
        status, body = b.status("/readyz")
        assert status == 503 and json.loads(body)["code"] == "standby", body
        # Once its first attempt is answered, the standby names the writer.
        assert wait_for(lambda: "replica-a/" in b.readiness().get("message", ""),
                        timeout=10), b.status("/readyz")
        load = Load([a, b]).start()
        assert wait_for(lambda: len(load.acknowledged) >= 10, timeout=20)
        for _ in range(3):
            writer, standby = (a, b) if a.ready() else (b, a)
            assert writer.ready() and not standby.ready()
            seen = len(load.acknowledged)
            writer.process.kill()
            writer.process.wait(timeout=10)
            killed = time.monotonic()
            assert wait_for(standby.ready, timeout=30), standby.logs()
            takeovers.append(round(time.monotonic() - killed, 2))
            # Kubernetes restarts the killed container: it comes back as a standby.
            writer.log.close()
            writer.start(ready=False)
            status, body = writer.status("/readyz")
            assert status == 503 and json.loads(body)["code"] == "standby", body
            assert wait_for(lambda: len(load.acknowledged) >= seen + 10, timeout=30)
        load.stop()
        final = a if a.ready() else b
        acknowledged = load.acknowledged
        # Every 202 is in the store: its event key, and its object's drift.
        stored = set(pg.psql(url, "SELECT id FROM events").split())
        assert {event_id for event_id, _, _ in acknowledged} <= stored
        edited = sorted({name for _, name, verb in acknowledged if verb == "update"})
        assert len(edited) >= 20
        firing = final.api("/api/v1/drifts?state=firing&class=config_drift&limit=500")["items"]
        assert sorted(drift["name"] for drift in firing) == edited
        # Every firing drift notified, each under exactly one idempotency key.
        assert wait_for(lambda: {d["name"] for d in receiver.drifts} >= set(edited), timeout=60), \
            sorted(set(edited) - {d["name"] for d in receiver.drifts})
        keys = {}
        for webhook_id, drift in zip(receiver.ids, receiver.drifts):
            keys.setdefault((drift["id"], drift["state"]), set()).add(webhook_id)
        assert all(len(ids) == 1 for ids in keys.values()), keys
        assert receiver.bad == 0
        assert all(takeover < 15 for takeover in takeovers), takeovers
        metrics = final.status("/metrics")[1].decode()
        assert 'drift_sentinel_writer_lease_held{shard="default"} 1' in metrics
        assert 'drift_sentinel_writer_lease_takeovers_total{shard="default"}' in metrics
    finally:
        if load:
            load.stop()
        stop_all(a, b)
        receiver.stop()
    OUTPUT.mkdir(exist_ok=True)
    (OUTPUT / "ha-takeover.json").write_text(json.dumps(
        {"lease": "shipped defaults (ttl 10s, renewInterval 2s, retryInterval 1s)",
         "takeoverSeconds": takeovers, "eventsAcknowledged": len(acknowledged)}, indent=2))


def test_a_paused_writer_is_fenced_commits_nothing_and_turns_unready(pg, workdir):
    """The writer loses the database (paused with SIGSTOP past its lease) while the standby
    takes over; when it wakes, an event it was sent meanwhile is not committed, it turns unready
    and stands by, and takes over again when the new writer dies."""
    url = pg.database()
    a, b = writer_and_standby(workdir, url)
    try:
        drift_then_pause(a)
        # An event reaches the paused writer (its socket accepts; nothing answers).
        late = config_map("config-late")
        answer = {}
        sender = threading.Thread(target=lambda: answer.update(status=a.send("late-1", "add", late)[0]))
        sender.start()
        assert wait_for(b.ready, timeout=20), b.logs()
        a.process.send_signal(signal.SIGCONT)
        sender.join(timeout=30)
        assert answer.get("status") != 202, answer
        # It turns unready, stops writing, and stands by again in the same process.
        assert wait_for(lambda: "Lost the writer lease" in a.logs(), timeout=10), a.logs()
        assert wait_for(lambda: a.readiness().get("code") == "standby",
                        timeout=20), a.status("/readyz")
        assert a.process.poll() is None, a.logs()
        metrics = a.status("/metrics")[1].decode()
        assert lease_losses(a) == 1, metrics
        assert 'drift_sentinel_writer_lease_held{shard="default"} 0' in metrics
        # Fencing: nothing of the late event was committed, by anyone.
        assert pg.psql(url, "SELECT count(*) FROM events WHERE id = 'late-1'") == "0"
        assert pg.psql(url, "SELECT count(*) FROM objects WHERE body LIKE '%config-late%'") == "0"
        # The new writer has the state from before, and takes the event when the Broker retries.
        assert [d["name"] for d in b.api("/api/v1/drifts?state=firing")["items"]] == ["config-before"]
        assert b.send("late-1", "add", late)[0] == 202
        assert pg.psql(url, "SELECT count(*) FROM events WHERE id = 'late-1'") == "1"
        # The fenced replica is a working standby: when the new writer dies, it takes over again.
        b.process.kill()
        assert wait_for(a.ready, timeout=20), a.logs()
        names = sorted(d["name"] for d in a.api("/api/v1/drifts?state=firing")["items"])
        assert names == ["config-before"], names
        assert a.send("late-2", "update", edit(late, "max-scale", "3"))[0] == 202
    finally:
        stop_all(a, b)


SLOW_INSERT = """
CREATE FUNCTION slow_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.id = 'slow-1' THEN PERFORM pg_sleep(2); END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER slow_insert BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION slow_insert();
"""


def test_a_writer_paused_inside_a_commit_does_not_block_the_takeover(pg, workdir):
    """Paused (or its node lost, or cut off) while a commit's transaction is open, the writer's
    session keeps the lease row locked (the fence's SELECT ... FOR UPDATE). Nothing on the server
    ends an idle transaction unless the writer's session sets it up (an idle-in-transaction
    timeout, keepalives), and a standby's acquire without a lock timeout would wait on the row
    lock for as long as the old writer is gone, instead of taking over after the ttl."""
    url = pg.database()
    a, b = writer_and_standby(workdir, url)
    try:
        pg.psql(url, SLOW_INSERT)
        sender = threading.Thread(
            target=lambda: a.send("slow-1", "add", config_map("config-slow")), daemon=True)
        sender.start()
        # The commit is inside its transaction (the event insert sleeps server-side): pause it.
        assert wait_for(lambda: pg.psql(
            url, "SELECT count(*) FROM pg_stat_activity "
                 "WHERE datname = current_database() AND wait_event = 'PgSleep'") == "1",
            timeout=10)
        a.process.send_signal(signal.SIGSTOP)
        taken = wait_for(b.ready, timeout=20)
        locks = pg.psql(url, "SELECT state || ' / ' || coalesce(wait_event, '') || ' / ' || left(query, 60) "
                             "FROM pg_stat_activity WHERE datname = current_database() AND pid != pg_backend_pid()")
        assert taken, f"standby not ready 20 s after the writer paused:\n{locks}"
    finally:
        if a.process and a.process.poll() is None:
            a.process.send_signal(signal.SIGCONT)
        stop_all(a, b)


def test_a_fenced_writer_standing_by_does_not_keep_exporting_the_writers_gauges(pg, workdir):
    """A replica that lost its lease stands by in the same process with its metrics intact; the
    writer's gauges (drifts_firing, outbox_pending, ...) must not stay frozen at their last
    values: KnativeDriftFiring sums drifts_firing over every scraped replica (standbys are
    scraped), so one firing drift would count twice, and keep the alert firing after the new
    writer resolved it."""
    url = pg.database()
    a, b = writer_and_standby(workdir, url)
    try:
        drift_then_pause(a, until=lambda: firing_gauge(a) == 1)
        assert wait_for(b.ready, timeout=20), b.logs()
        a.process.send_signal(signal.SIGCONT)
        # Its lease ran out while it was paused: unready from its first answer on, before its
        # keeper looks (CI once caught it answering `ready` here).
        assert a.status("/readyz")[0] == 503, a.status("/readyz")
        assert wait_for(lambda: a.readiness().get("code") == "standby",
                        timeout=20)
        assert wait_for(lambda: firing_gauge(b) == 1, timeout=10)
        # One drift fires in the shard; the standby must not report it as well (once its writer
        # role has stopped, which takes a moment after it stands by).
        assert wait_for(lambda: firing_gauge(a) == 0, timeout=15), (firing_gauge(a), firing_gauge(b))
        assert firing_gauge(a) + firing_gauge(b) == 1, (firing_gauge(a), firing_gauge(b))
    finally:
        if a.process and a.process.poll() is None:
            a.process.send_signal(signal.SIGCONT)
        stop_all(a, b)


def test_renewing_at_a_third_of_the_ttl_never_loses_the_lease(pg, workdir):
    """Validation accepts `renewInterval` up to a third of the ttl. The keeper must start a due
    renewal before it checks its give-up deadline (ttl - renewInterval): checked the other way
    round, the writer 'lost' its lease at every renewal. Seven seconds: seven renewals, more
    than two ttls."""
    url = pg.database()
    lease = "  lease: {ttl: 3s, renewInterval: 1s, retryInterval: 200ms}\n"
    a = Replica(workdir, "replica-a", config(url, lease=lease)).start()
    try:
        time.sleep(7)
        losses = lease_losses(a)
        assert losses == 0, [line for line in a.logs().splitlines() if "Lost the writer" in line]
    finally:
        stop_all(a)


def test_a_replica_that_cannot_reach_its_database_stands_by_until_it_can(pg, workdir):
    """At start the database does not exist yet (as when PostgreSQL is still coming up): the
    replica stays alive and unready, says why, and becomes the writer once it can open it."""
    url = pg.url("not_yet")
    replica = Replica(workdir, "replica-a", config(url, lease=FAST_LEASE)).start(ready=False)
    try:
        assert wait_for(lambda: "cannot reach the store" in replica.status("/readyz")[1].decode(),
                        timeout=10), replica.status("/readyz")
        status, body = replica.status("/readyz")
        assert status == 503, body
        answer = json.loads(body)
        assert answer["code"] == "standby", answer
        assert "not_yet" in answer["message"], answer
        metrics = replica.status("/metrics")[1].decode()
        assert 'drift_sentinel_writer_lease_held{shard="default"} 0' in metrics, metrics
        pg.database("not_yet")
        assert wait_for(replica.ready, timeout=20), replica.logs()
        assert replica.send("late-db-1", "add", config_map("config-after"))[0] == 202
    finally:
        stop_all(replica)


# ---- Shards ----------------------------------------------------------------------------------------

def test_shards_take_only_their_clusters_and_each_api_shows_both(pg, workdir):
    url = pg.database()
    east = Replica(workdir, "east", config(
        url, lease=FAST_LEASE, extra=f"shard:\n  name: east\n  clusters: [\"east-*\"]\n  silenceSyncInterval: {SILENCE_SYNC}\nresync: {{enabled: false}}\n")).start()
    west = Replica(workdir, "west", config(
        url, lease=FAST_LEASE, extra=f"shard:\n  name: west\n  clusters: [\"west-*\"]\n  silenceSyncInterval: {SILENCE_SYNC}\nresync: {{enabled: false}}\n")).start()
    try:
        for replica, cluster in ((east, "east-1"), (west, "west-1")):
            base = config_map("config-autoscaler")
            base["metadata"]["uid"] = f"uid-{cluster}"
            assert replica.send(f"{cluster}-a", "add", base, cluster=cluster)[0] == 202
            changed = edit(base, "max-scale", "9")
            assert replica.send(f"{cluster}-b", "update", changed, cluster=cluster)[0] == 202
        # A misrouted event: refused with 421 naming the shard and its config, not applied.
        stray = config_map("config-stray")
        status, _, body = east.send("stray-1", "add", stray, cluster="west-2")
        assert status == 421, body
        error = json.loads(body)
        assert error["code"] == "cluster_not_in_shard"
        assert '"east"' in error["message"] and "east-*" in error["message"], error
        assert pg.psql(url, "SELECT count(*) FROM events WHERE id = 'stray-1'") == "0"
        # Each shard's writer processes only its clusters; either API shows both.
        for replica in (east, west):
            drifts = replica.api("/api/v1/drifts?state=firing")["items"]
            assert sorted(d["cluster"] for d in drifts) == ["east-1", "west-1"], drifts
        metrics = east.status("/metrics")[1].decode()
        assert 'drift_sentinel_shard_events_total{shard="east",outcome="refused"} 1' in metrics
        assert 'drift_sentinel_writer_lease_held{shard="east"} 1' in metrics
        # Both writers hold their own shard's lease at once.
        holders = pg.psql(url, "SELECT shard || '=' || split_part(holder, '/', 1) FROM writer_lease ORDER BY shard")
        assert holders.split() == ["east=east", "west=west"]
        # A silence created through east's API is enforced by west's writer too (read back
        # from the shared store): west's next drift in west-1 queues no notification, while one
        # it does not cover does.
        create_silence(east, {"cluster": "west-1", "name": "config-quiet"}, "shard test")
        assert [s["id"] for s in west.api("/api/v1/silences")["items"]], "west's API lists it"
        time.sleep(SILENCE_READ_BACK + 1)  # west's writer reads the shared silences back
        for name in ("config-quiet", "config-loud"):
            base = config_map(name)
            base["metadata"]["uid"] = f"uid-west-{name}"
            assert west.send(f"{name}-a", "add", base, cluster="west-1")[0] == 202
            assert west.send(f"{name}-b", "update", edit(base, "max-scale", "4"), cluster="west-1")[0] == 202
        firing = {d["name"]: d["id"] for d in west.api("/api/v1/drifts?state=firing")["items"]}
        assert {"config-quiet", "config-loud"} <= set(firing), firing
        queued = {d["driftId"] for d in west.api("/api/v1/deliveries?limit=100")["items"]}
        assert firing["config-loud"] in queued and firing["config-quiet"] not in queued, queued
        # Each shard's notifications are its own: queued as its shard's, sent by its relays.
        shards = pg.psql(url, "SELECT string_agg(DISTINCT coalesce(shard, '-'), ',' ORDER BY coalesce(shard, '-')) FROM outbox")
        assert shards == "east,west", shards
        # A restarted shard writer loads only its own clusters' objects. (Its readiness can turn
        # before it logs that it became the writer: the line is waited for.)
        west.stop()
        west.log.close()
        before_restart = len(west.logs())
        west.start()
        assert wait_for(lambda: "Became the writer." in west.logs()[before_restart:], timeout=10), west.logs()[-2000:]
        became = west.logs()[before_restart:].split("Became the writer.")[-1]
        # Its three west-1 objects, none of east-1's.
        assert '"objects":3' in became or "objects=3" in became, west.logs()[-2000:]
    finally:
        stop_all(east, west)


FLEET = """\
fleet:
  groups:
    - name: prod
      clusters: ["prod-*"]
      compare:
        - {apiVersion: v1, kind: ConfigMap, namespace: knative-serving, name: "config-*"}
      severity: critical
      grace: 1s
shard:
  name: prod
  clusters: ["prod-*"]
resync: {enabled: false}
"""


@pytest.mark.parametrize("sharded", [True, False])
def test_a_sharded_writer_keeps_its_fleet_drifts_across_a_restart(pg, workdir, sharded):
    """A fleet drift's cluster is `fleet:<group>`, which no shard glob such as `prod-*` matches.
    Were it dropped at load for not being the shard's (`snapshot.drifts.retain(shard.owns(...))`),
    after a restart or takeover the shard would open the same divergence again under a new id and
    notify again, while the old drift stayed firing in the database forever (no writer owns it).
    (sharded=False is the control: the same restart without `shard:` keeps the drift.)"""
    from test_fleet import post
    url = pg.database()
    extra = FLEET if sharded else FLEET.split("shard:")[0]
    a = Replica(workdir, "replica-a", config(url, extra=extra)).start()
    try:
        for cluster in ("prod-eu", "prod-us"):
            post(a, cluster, "add", autoscaler(cluster))
        post(a, "prod-us", "update", with_key(autoscaler("prod-us"), "7"))

        def firing():
            return a.api("/api/v1/drifts?class=fleet_divergence&state=firing")["items"]
        assert wait_for(lambda: len(firing()) == 1, timeout=20), firing()
        before = [d["id"] for d in firing()]
        a.stop()
        a.log.close()
        a.start()
        time.sleep(4)  # grace (1s) and the restored objects' re-assessment
        after = [d["id"] for d in firing()]
        assert after == before, (before, after)
    finally:
        stop_all(a)


def test_a_shard_starting_leaves_the_other_shards_notifications_pending(pg, workdir):
    """The outbox is shared by all shards: a shard starting or taking over must not expire
    another shard's undelivered notifications as of a channel it does not configure ('channel
    no longer configured'), as expiring every pending row of an unknown channel at start
    (`expire_unknown_channels`) would."""
    url = pg.database()
    dead = reserve_port()  # nobody listens: east's notifications stay pending, retrying
    east_config = config(url, hook_port=dead.getsockname()[1], extra=(
        "shard:\n  name: east\n  clusters: [\"east-*\"]\nresync: {enabled: false}\n"))
    east = Replica(workdir, "east", east_config).start()
    west = Replica(workdir, "west", config(url, extra=(
        "shard:\n  name: west\n  clusters: [\"west-*\"]\nresync: {enabled: false}\n")))
    try:
        base = config_map("config-east")
        assert east.send("east-a", "add", base, cluster="east-1")[0] == 202
        assert east.send("east-b", "update", edit(base, "max-scale", "5"), cluster="east-1")[0] == 202
        assert wait_for(lambda: pg.psql(
            url, "SELECT count(*) FROM outbox WHERE channel = 'hook' AND state = 'pending' AND attempts > 0") != "0",
            timeout=20), pg.psql(url, "SELECT state, attempts FROM outbox")
        west.start()
        time.sleep(1)
        states = pg.psql(url, "SELECT state || ':' || coalesce(last_error, '') FROM outbox WHERE channel = 'hook'")
        assert all(line.startswith("pending:") for line in states.splitlines()), states
    finally:
        stop_all(east, west)
        dead.close()


def test_a_silence_made_on_one_shard_stops_the_other_shards_reminders(pg, workdir):
    """Creating a silence withdraws the pending reminders of the open drifts it covers: those of
    the creating shard (apply_silences), and those of every other shard too when it reads the
    silence back (sync_silences), not only for routing its new transitions."""
    url = pg.database()
    receiver = WebhookReceiver().start()

    def shard_config(name):
        return (f"store:\n  url: \"{url}\"\n"
                "  lease: {ttl: 3s, renewInterval: 1s, retryInterval: 200ms}\n"
                "server:\n  drainTimeout: 5s\n"
                "channels:\n"
                f"  - name: hook\n    type: webhook\n    url: http://127.0.0.1:{receiver.port}/hook\n    secret: {WHSEC}\n"
                "routes:\n  - channels: [hook]\n    groupWait: 0s\n    groupInterval: 0s\n    groupBy: [name]\n    repeatInterval: 1s\n"
                f"shard:\n  name: {name}\n  clusters: [\"{name}-*\"]\n  silenceSyncInterval: {SILENCE_SYNC}\n"
                "resync: {enabled: false}\n")
    east = Replica(workdir, "east", shard_config("east")).start()
    west = Replica(workdir, "west", shard_config("west")).start()
    try:
        base = config_map("config-loud")
        assert west.send("w-a", "add", base, cluster="west-1")[0] == 202
        assert west.send("w-b", "update", edit(base, "max-scale", "4"), cluster="west-1")[0] == 202

        def sent():
            return sum(1 for drift in receiver.drifts if drift["name"] == "config-loud")
        assert wait_for(lambda: sent() >= 3, timeout=20), "reminders flow before the silence"
        create_silence(east, {"cluster": "west-1", "name": "config-loud"}, "silence through another shard")
        time.sleep(SILENCE_READ_BACK + 2)  # past west's read-back and a reminder already in flight
        settled = sent()
        time.sleep(3)  # three reminder intervals
        assert sent() == settled, f"reminders still sent under the silence: {settled} -> {sent()}"
    finally:
        stop_all(east, west)
        receiver.stop()


# ---- Both backends alike -------------------------------------------------------------------------

def test_an_event_sqlite_accepts_is_not_a_store_failure_on_postgresql(pg, workdir):
    """PostgreSQL text cannot hold NUL; SQLite's can. A CloudEvent whose id (or `cluster`
    extension) contains U+0000 must not be 202 on SQLite but fail the whole commit on PostgreSQL
    (503 `store`, every request batched into the same round failing with it, the writer marking
    the store not writable and turning unready): a test that passes on SQLite and fails on
    PostgreSQL is a bug. Either both accept it, or it is refused (400) before the store."""
    url = pg.database()
    a = Replica(workdir, "replica-a", config(url)).start()
    try:
        body = {"specversion": "1.0", "id": "nul\u0000id", "source": "https://10.96.0.1:443",
                "type": "dev.knative.apiserver.resource.add", "subject": "/x", "cluster": "prod",
                "datacontenttype": "application/json", "data": config_map("config-nul")}
        status, _, answer = a.post({"content-type": "application/cloudevents+json"},
                                   json.dumps(body).encode())
        ready = a.status("/readyz")[0]
        assert (status, ready) == (202, 200) or status == 400, (status, answer, ready)
    finally:
        stop_all(a)
