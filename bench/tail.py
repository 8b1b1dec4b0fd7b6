#!/usr/bin/env python3
"""Where the open loop's slow requests come from (BENCHMARKS.md, issue 28, fourteenth round).

  bench/tail.py sample SECONDS > samples.jsonl
      every 10 ms, each running drift-sentinel process's CPU time by thread (schedstat), and
      every 100 ms its writer, commit and sync histograms (/metrics on the config's port);
      JSON lines on stdout. Start it before `bench-loadgen run ... --timelines DIR`.
  bench/tail.py episodes TIMELINE.csv samples.jsonl [TRACE CLOCK]
      the slow requests (over 10 ms) of one open-loop timeline grouped into episodes (slow
      requests whose waits overlap or lie within 5 ms of each other), each with what the sink's
      threads did meanwhile; with a `perf trace -T -e fsync,fdatasync -a` output and CLOCK (a
      line `time.time() time.monotonic()` taken when the trace started), the syncs by thread
      around each episode as well. perf's -T clock is taken for CLOCK_MONOTONIC: true to a few
      milliseconds on a machine up for an hour, less so after days (it is not NTP-corrected).
"""
import collections
import json
import os
import re
import sys
import time
import urllib.request

# The process names `sample` looks for, as /proc shows them (cut to 15 characters): a copy of the
# binary under another name needs DRIFT_SENTINEL_NAMES (`episodes` reads what was sampled).
NAMES = tuple(os.environ.get('DRIFT_SENTINEL_NAMES', 'drift-sentinel').split(','))
WANT = ('drift_sentinel_writer_round_seconds_bucket', 'drift_sentinel_store_commit_seconds_bucket',
        'drift_sentinel_store_sync_seconds_bucket')


def sinks():
    for pid in os.listdir('/proc'):
        if pid.isdigit():
            try:
                with open(f'/proc/{pid}/comm') as comm:
                    if comm.read().strip() in NAMES:
                        yield int(pid)
            except OSError:
                pass


def port_of(pid):
    try:
        with open(f'/proc/{pid}/cmdline') as f:
            args = f.read().split('\0')
        with open(args[args.index('--config') + 1]) as f:
            match = re.search(r'port: (\d+)', f.read())
        return int(match.group(1)) if match else None
    except (OSError, ValueError, IndexError):
        return None


def read(path):
    with open(path) as f:
        return f.read()


def sample(seconds):
    end, last_metrics = time.time() + seconds, 0.0
    while time.time() < end:
        now = time.time()
        scrape = now - last_metrics >= 0.1
        for pid in sinks():
            record = {'t': now, 'pid': pid, 'thr': {}}
            try:
                tids = os.listdir(f'/proc/{pid}/task')
            except OSError:
                continue
            for tid in tids:
                try:
                    comm = read(f'/proc/{pid}/task/{tid}/comm').strip()
                    record['thr'][f'{comm}/{tid}'] = int(read(f'/proc/{pid}/task/{tid}/schedstat').split()[0])
                except OSError:
                    pass
            port = port_of(pid) if scrape else None
            if port:
                try:
                    body = urllib.request.urlopen(f'http://127.0.0.1:{port}/metrics', timeout=0.5).read()
                    record['m'] = [l for l in body.decode().splitlines() if l.startswith(WANT)]
                    # The scrape can wait for a loaded sink: the histograms are as of its end.
                    record['tm'] = time.time()
                except OSError:
                    pass
            print(json.dumps(record), flush=True)
        if scrape:
            last_metrics = now
        time.sleep(max(0.0, 0.01 - (time.time() - now)))


def episodes(timeline, samples_path, trace=None, clock=None, slow_us=10_000):
    lines = read(timeline).splitlines()
    start = int(lines[0].split('=')[1]) / 1e6
    requests = [tuple(map(int, line.split(','))) for line in lines[2:]]
    if not requests:
        sys.exit(f'{timeline}: no request')
    duration = requests[-1][0] / 1e6
    latencies = sorted(latency for _, latency in requests)
    pick = lambda p: latencies[min(len(latencies) - 1, int(len(latencies) * p))] / 1000
    print(f'{len(requests)} requests over {duration:.1f} s: p50 {pick(.5):.2f}, p99 {pick(.99):.2f}, '
          f'p99.9 {pick(.999):.2f}, max {latencies[-1] / 1000:.1f} ms')
    groups = []
    for offset, latency in requests:
        if latency <= slow_us:
            continue
        begin, end = offset / 1e6, (offset + latency) / 1e6
        if groups and begin <= groups[-1][1] + 0.005:
            groups[-1][1] = max(groups[-1][1], end)
            groups[-1][2] += 1
            groups[-1][3] = max(groups[-1][3], latency)
        else:
            groups.append([begin, end, 1, latency])
    slow = sum(g[2] for g in groups)
    seconds = collections.defaultdict(list)
    for offset, latency in requests:
        seconds[offset // 1_000_000].append(latency)
    print('p99 of each second, ms:', ' '.join(
        f'{sorted(v)[int(len(v) * .99)] / 1000:.1f}' for _, v in sorted(seconds.items())))
    print(f'{slow} requests over {slow_us / 1000:g} ms ({100 * slow / len(requests):.2f} %) in {len(groups)} episodes')
    samples = [r for r in map(json.loads, open(samples_path)) if start - 1 <= r['t'] <= start + duration + 1]
    pid = collections.Counter(r['pid'] for r in samples).most_common(1)[0][0] if samples else None
    samples = [r for r in samples if r['pid'] == pid]
    names = {key.rsplit('/', 1)[1]: key.rsplit('/', 1)[0] for r in samples for key in r['thr']}

    def around(t0, t1, metrics=False):
        pool = [r for r in samples if 'm' in r] if metrics else samples
        at = (lambda r: r.get('tm', r['t'])) if metrics else (lambda r: r['t'])
        before = max((r for r in pool if at(r) <= t0), key=at, default=None)
        after = min((r for r in pool if at(r) >= t1), key=at, default=None)
        return before, after

    def cpu(t0, t1):
        a, b = around(t0, t1)
        if not a or not b or b['t'] <= a['t']:
            return {}
        used = collections.Counter()
        for key, ns in b['thr'].items():
            used[re.sub(r'\d+$', '', key.split('/')[0])] += (ns - a['thr'].get(key, 0)) / 1e6
        return {k: round(v / (b['t'] - a['t'])) for k, v in used.most_common(5)}

    def slow_rounds(t0, t1):
        a, b = around(t0, t1, metrics=True)
        if not a or not b:
            return {}
        parse = lambda r: {l.rsplit(' ', 1)[0]: float(l.rsplit(' ', 1)[1]) for l in r['m']}
        da, db = parse(a), parse(b)
        # Scraped every 100 ms: the counts cover the episode and up to 0.2 s around it.
        out = {'from': round(a.get('tm', a['t']) - start, 2), 'to': round(b.get('tm', b['t']) - start, 2)}
        for name in ('writer_round', 'store_commit', 'store_sync'):
            key = lambda le: f'drift_sentinel_{name}_seconds_bucket{{le="{le}"}}'
            total = db.get(key('+Inf'), 0) - da.get(key('+Inf'), 0)
            fast = db.get(key('0.004'), 0) - da.get(key('0.004'), 0)
            out[name] = f'{int(total - fast)}/{int(total)} over 4 ms'
        return out

    print('whole run, CPU ms per second by thread:', cpu(start, start + duration))
    print('whole run:', slow_rounds(start, start + duration))
    calls = []
    if trace and clock:
        wall, mono = map(float, read(clock).split())
        # A call interleaved with another thread's ends on a `... [continued]: fsync())` line,
        # which carries its duration: the long calls are mostly those.
        pattern = re.compile(
            r'^\s*([\d.]+) \(\s*([\d.]+) ms\): (\S+)/(\d+)\s+(?:\.\.\. \[continued\]: )?(\w+)\(')
        complete = set()
        for line in open(trace):
            m = pattern.match(line)
            if m and '[continued]' not in line:
                complete.add((m.group(4), m.group(1)))
            elif m and (m.group(4), m.group(1)) in complete:
                # perf paired a call's entry with a later call's exit: a bogus duration.
                continue
            # Only the sink's threads, within the loop; perf prints a wrapped negative duration
            # when it paired a call's exit with the next call's entry.
            if m and m.group(4) in names and float(m.group(2)) < 1e5:
                t = float(m.group(1)) / 1000 + wall - mono - start
                if -1 <= t <= duration + 1:
                    calls.append((t, float(m.group(2)), names[m.group(4)], m.group(5)))
        by_thread = collections.defaultdict(list)
        for t, took, thread, _ in calls:
            if 0 <= t <= duration:
                by_thread[thread].append(took)
        for thread, took in sorted(by_thread.items()):
            took.sort()
            print(f'{thread}: {len(took)} syncs, mean {sum(took) / len(took):.2f} ms, '
                  f'p99 {took[int(len(took) * .99)]:.2f} ms, {sum(t > 4 for t in took)} over 4 ms')
    for begin, end, count, worst in sorted(groups, key=lambda g: -g[3])[:15]:
        print(f'  {begin:6.3f}-{end:6.3f} s: {count} slow, max {worst / 1000:.1f} ms; '
              f'CPU ms/s {cpu(start + begin - 0.01, start + end)}; '
              f'{slow_rounds(start + begin - 0.05, start + end + 0.05)}')
        near = [c for c in calls if begin - 0.3 <= c[0] <= end and (c[1] > 1.0 or not c[2].startswith('drift-sync'))]
        if near:
            print('      syncs from 0.3 s before:', ', '.join(f'{th} {t - begin:+.3f} s {d:.1f} ms' for t, d, th, _ in near))


if __name__ == '__main__':
    if len(sys.argv) >= 3 and sys.argv[1] == 'sample':
        sample(float(sys.argv[2]))
    elif len(sys.argv) in (4, 6) and sys.argv[1] == 'episodes':
        episodes(*sys.argv[2:])
    else:
        sys.exit(__doc__)
