// protolab speed test: idle latency, download and upload capacity and responsiveness under
// working conditions (RPM, draft-ietf-ippm-responsiveness) from a browser, as 003 ch. 5 built
// into LibreSpeed. No libraries. docs/live.md, "The speed-test page", describes the method.
//
// Parameters, in the query string or the fragment (the fragment wins; `protolab-net serve`
// matches a path's query exactly, so `/#coordinator=...` is how to pass them to a page it
// serves): coordinator=URL (get a token first, upload the result with it), autostart=1,
// the draft's parameters under the names `protolab-net rpm` gives them (mad, interval_s, tmp,
// sdt in percent, mnp, mps, max_duration_s: the time limit per direction, idle_probes),
// upload_mib (the upload bodies), directions=download,upload, and load_origins (how many load
// origins load1.<host> .. the server has: load-generating connection i goes to load<i>.<host>,
// so that each is a connection of its own; 0: every request on the page's own origin).
'use strict';

(() => {
  const SCHEMA = 'protolab.rpm.browser';
  const SCHEMA_VERSION = 1;
  // The synthetic endpoints of `protolab-net serve` that stand in for the responsiveness
  // config's URLs when the server has no /.well-known/nq (LibreSpeed's routes, 003 Table 5.1).
  const FALLBACK_URLS = { small: '/bytes?n=1', large: '/bytes?n=8000000000', upload: '/upload' };
  const TOKEN_WAIT_MS = 30000; // a busy coordinator (409) is asked again for this long
  const LOAD_CHECK_MS = 5000; // how long the first load origin may take to answer

  const query = new URLSearchParams(location.search);
  for (const [k, v] of new URLSearchParams(location.hash.replace(/^#/, ''))) query.set(k, v);

  function numberParam(name, fallback, min, max) {
    const raw = query.get(name);
    if (raw === null || raw === '') return fallback;
    const v = Number(raw);
    if (!Number.isFinite(v) || v < min || v > max) {
      throw new Error(`query parameter ${name}=${raw}: expected a number from ${min} to ${max}`);
    }
    return v;
  }

  // The draft's parameters, except MPS: 100 probes/s keep a browser too busy to measure
  // capacity; 003 settled on 10. Names and units as `protolab-net rpm`'s result has them.
  function readParameters() {
    // The draft's order: download, then upload. The load runs on the load origins' connections,
    // not on the page's own (docs/live.md, "The speed-test page").
    const directions = (query.get('directions') || 'download,upload').split(',').map((d) => d.trim()).filter(Boolean);
    for (const d of directions) {
      if (d !== 'download' && d !== 'upload') throw new Error(`query parameter directions: unknown direction ${d}`);
    }
    if (!directions.length || new Set(directions).size !== directions.length) {
      throw new Error('query parameter directions: download and/or upload, each once');
    }
    return {
      mad: Math.round(numberParam('mad', 4, 2, 20)),
      interval_s: numberParam('interval_s', 1, 0.1, 10),
      tmp: numberParam('tmp', 95, 50, 100),
      sdt: numberParam('sdt', 5, 0.1, 100),
      inp: 1,
      inc: 1,
      mnp: Math.round(numberParam('mnp', 16, 1, 64)),
      mps: numberParam('mps', 10, 0.5, 100),
      max_duration_s: numberParam('max_duration_s', 20, 2, 120),
      idle_probes: Math.round(numberParam('idle_probes', 10, 1, 100)),
      upload_body_bytes: Math.round(numberParam('upload_mib', 0.25, 0.0625, 64) * 1048576),
      load_origins: Math.round(numberParam('load_origins', 16, 0, 64)),
      directions,
      probes: 'self',
    };
  }

  // ------------------------------------------------------------------ statistics

  const sum = (a) => a.reduce((s, x) => s + x, 0);
  const mean = (a) => sum(a) / a.length;
  function stddev(a) {
    const m = mean(a);
    return Math.sqrt(mean(a.map((x) => (x - m) * (x - m))));
  }
  function median(a) {
    const s = [...a].sort((x, y) => x - y);
    const n = s.length;
    return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
  }
  // Single-sided trimmed mean: the mean of the lowest `pct` percent (the draft's TMP).
  function trimmedMean(a, pct) {
    const s = [...a].sort((x, y) => x - y);
    const keep = Math.max(1, Math.ceil((s.length * pct) / 100));
    return mean(s.slice(0, keep));
  }
  // The draft's "Confidence of Test-Results": high when the stage reached stability, medium
  // when it ran at least MAD iterations without, low when it did not even run MAD iterations.
  function confidence(stable, iterations, mad) {
    if (stable) return 'high';
    return iterations >= mad ? 'medium' : 'low';
  }
  const round = (x, digits = 3) => (x === null || x === undefined || !Number.isFinite(x) ? null : Number(x.toFixed(digits)));
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

  function protocolName(p) {
    const v = (p || '').toLowerCase();
    if (v === 'h3' || v.startsWith('h3-') || v === 'http/3' || v.includes('quic')) return 'h3';
    if (v === 'h2') return 'h2';
    if (v === 'http/1.1' || v === 'http/1.0') return location.protocol === 'http:' ? 'h1c' : 'h1';
    return v || 'unknown';
  }

  // ------------------------------------------------------------------ resource timing

  // Probe round trips come from Resource Timing when the browser gives it (responseStart -
  // requestStart: the request on the wire to the response's first byte, without the page's
  // own scheduling), else from the page's clock around the fetch. Every measurement request's
  // nextHopProtocol is counted to say which protocol the test used.
  const timing = {
    urls: new Set(),
    waiting: [],
    protocols: {},
    observe() {
      if (performance.setResourceTimingBufferSize) performance.setResourceTimingBufferSize(20000);
      if (typeof PerformanceObserver === 'undefined') return;
      try {
        new PerformanceObserver((list) => list.getEntries().forEach((e) => this.entry(e))).observe({ type: 'resource', buffered: true });
      } catch (_) { /* no Resource Timing: wall-clock round trips only */ }
    },
    entry(e) {
      if (!this.urls.has(e.name)) return;
      const p = protocolName(e.nextHopProtocol);
      if (e.nextHopProtocol) this.protocols[p] = (this.protocols[p] || 0) + 1;
      let best = -1;
      let bestGap = Infinity;
      this.waiting.forEach((probe, i) => {
        const gap = Math.abs(probe.start - e.startTime);
        if (probe.url === e.name && gap < bestGap) { best = i; bestGap = gap; }
      });
      if (best < 0 || bestGap > 50) return;
      const [probe] = this.waiting.splice(best, 1);
      if (e.requestStart > 0 && e.responseStart >= e.requestStart) {
        probe.record.rtt_ms = round(e.responseStart - e.requestStart);
        probe.record.timing = 'resource';
      }
    },
  };

  // One probe: a GET of the small object on a connection the page has (a `self` probe: a
  // browser cannot ask for a fresh connection): the page's own for the idle latency, a
  // load-generating one under load.
  async function probe(url, origin, signal, records) {
    const start = performance.now();
    const record = { t_ms: round(start - origin), rtt_ms: null, wall_ms: null, timing: 'wall', kind: 'self', host: new URL(url).hostname };
    const entry = { url, start, record };
    timing.waiting.push(entry);
    try {
      const res = await fetch(url, { cache: 'no-store', signal });
      await res.arrayBuffer();
      if (!res.ok) throw new Error(`probe ${url}: HTTP ${res.status}`);
      record.wall_ms = round(performance.now() - start);
      if (record.rtt_ms === null) record.rtt_ms = record.wall_ms;
      records.push(record);
      return record;
    } catch (err) {
      const i = timing.waiting.indexOf(entry);
      if (i >= 0) timing.waiting.splice(i, 1);
      if (signal && signal.aborted) return null;
      throw err;
    } finally {
      // Entries that never arrive (no Resource Timing) must not pile up.
      setTimeout(() => {
        const i = timing.waiting.indexOf(entry);
        if (i >= 0) timing.waiting.splice(i, 1);
      }, 5000);
    }
  }

  // ------------------------------------------------------------------ load generators

  async function downloadLoop(url, signal, onBytes) {
    while (!signal.aborted) {
      const res = await fetch(url, { cache: 'no-store', signal });
      if (!res.ok) throw new Error(`download ${url}: HTTP ${res.status}`);
      const reader = res.body.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        onBytes(value.byteLength);
      }
    }
  }

  // Uploads to the page's own origin go through XMLHttpRequest for its upload progress events
  // (fetch has none): bytes count as the browser reports them sent, the rest when the request
  // completes. To a load origin a POST with upload listeners (or a streamed body) would need a
  // CORS preflight, which the server does not answer: a plain fetch POST without a content type
  // (a "simple" request), its bytes counted when the server has answered.
  async function uploadFetch(url, body, signal, onBytes) {
    const res = await fetch(url, { method: 'POST', body, cache: 'no-store', signal });
    await res.arrayBuffer();
    if (!res.ok) throw new Error(`upload ${url}: HTTP ${res.status}`);
    onBytes(body.byteLength);
  }

  function uploadOnce(url, body, signal, onBytes) {
    if (new URL(url).origin !== location.origin) return uploadFetch(url, body, signal, onBytes);
    return new Promise((resolve, reject) => {
      const xhr = new XMLHttpRequest();
      let counted = 0;
      const count = (loaded) => {
        const delta = Math.min(loaded, body.byteLength) - counted;
        if (delta > 0) { counted += delta; onBytes(delta); }
      };
      const abort = () => xhr.abort();
      signal.addEventListener('abort', abort, { once: true });
      xhr.open('POST', url, true);
      xhr.upload.onprogress = (e) => count(e.loaded);
      xhr.onload = () => {
        signal.removeEventListener('abort', abort);
        if (xhr.status !== 200) { reject(new Error(`upload ${url}: HTTP ${xhr.status}`)); return; }
        count(body.byteLength);
        resolve();
      };
      xhr.onerror = () => { signal.removeEventListener('abort', abort); reject(new Error(`upload ${url}: network error`)); };
      xhr.onabort = () => resolve();
      xhr.send(body);
    });
  }

  async function uploadLoop(url, body, signal, onBytes) {
    while (!signal.aborted) {
      try {
        await uploadOnce(url, body, signal, onBytes);
      } catch (err) {
        if (signal.aborted) return;
        throw err;
      }
    }
  }

  // ------------------------------------------------------------------ user interface

  const $ = (id) => document.getElementById(id);
  const progress = { phase: 'none', direction: null, intervals: 0, goodput_bps: null, latency_ms: null, rpm: null, elapsed_s: 0, load_generators: 0 };
  window.speedtestProgress = progress;

  let phaseOrder = ['idle', 'download', 'upload', 'finished'];

  // The phase bar in the order the test runs.
  function orderPhases(directions) {
    phaseOrder = ['idle', ...directions, 'finished'];
    const bar = document.querySelector('.phases');
    bar.querySelectorAll('span').forEach((el) => { el.hidden = !phaseOrder.includes(el.dataset.step); });
    for (const step of phaseOrder) bar.append(bar.querySelector(`[data-step="${step}"]`));
  }

  function setPhase(phase, text) {
    progress.phase = phase;
    document.body.dataset.phase = phase;
    const order = phaseOrder;
    const at = order.indexOf(phase);
    document.querySelectorAll('.phases span').forEach((el) => {
      const i = order.indexOf(el.dataset.step);
      el.classList.toggle('active', i === at);
      el.classList.toggle('done', at >= 0 && i < at);
    });
    if (text) $('status').textContent = text;
  }

  const fmt = (x, digits = 1) => (x === null || x === undefined || !Number.isFinite(x) ? '–' : x.toFixed(digits));

  function showGauges() {
    $('g-goodput').textContent = fmt(progress.goodput_bps === null ? null : progress.goodput_bps / 1e6);
    $('g-latency').textContent = fmt(progress.latency_ms, 0);
    $('g-rpm').textContent = fmt(progress.rpm, 0);
    $('g-streams').textContent = progress.load_generators ? String(progress.load_generators) : '–';
  }

  const SVG = 'http://www.w3.org/2000/svg';
  function svg(tag, attrs, text) {
    const el = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
    if (text !== undefined) el.textContent = text;
    return el;
  }

  // Goodput per interval (line, left axis) and probe round trips (dots, right axis).
  function drawChart(intervals, probes, limitS) {
    const chart = $('chart');
    const W = 600, H = 180, L = 36, R = 40, T = 10, B = 20;
    chart.replaceChildren();
    const maxG = Math.max(1, ...intervals.map((i) => i.goodput_bps / 1e6)) * 1.15;
    const maxP = Math.max(10, ...probes.map((p) => p.rtt_ms || 0)) * 1.15;
    const x = (s) => L + (Math.min(s, limitS) / limitS) * (W - L - R);
    const yG = (v) => H - B - (v / maxG) * (H - T - B);
    const yP = (v) => H - B - (v / maxP) * (H - T - B);
    chart.append(svg('line', { x1: L, y1: H - B, x2: W - R, y2: H - B, class: 'axis' }));
    chart.append(svg('line', { x1: L, y1: T, x2: L, y2: H - B, class: 'axis' }));
    chart.append(svg('line', { x1: W - R, y1: T, x2: W - R, y2: H - B, class: 'axis' }));
    chart.append(svg('text', { x: 2, y: T + 8, class: 'tick' }, fmt(maxG, 0)));
    chart.append(svg('text', { x: W - 2, y: T + 8, class: 'tick', 'text-anchor': 'end' }, `${fmt(maxP, 0)} ms`));
    chart.append(svg('text', { x: W - R - 18, y: H - 6, class: 'tick' }, `${limitS} s`));
    for (const p of probes) {
      if (p.rtt_ms !== null) chart.append(svg('circle', { cx: x(p.t_ms / 1000), cy: yP(p.rtt_ms), r: 2, class: 'probe' }));
    }
    if (intervals.length) {
      const pts = [[x(0), yG(0)], ...intervals.map((i) => [x(i.t_s), yG(i.goodput_bps / 1e6)])];
      chart.append(svg('polyline', { points: pts.map(([a, b]) => `${a.toFixed(1)},${b.toFixed(1)}`).join(' '), class: 'goodput' }));
    }
  }

  function showCard(result) {
    const dl = result.directions.download;
    const ul = result.directions.upload;
    const mbit = (d) => (d && d.capacity_bps !== null ? fmt(d.capacity_bps / 1e6) : '–');
    const conf = (el, text, level) => { el.textContent = text; el.className = `conf ${level || ''}`; };
    $('r-down').textContent = mbit(dl);
    $('r-up').textContent = mbit(ul);
    if (dl) conf($('r-down-conf'), `confidence ${dl.confidence.capacity}`, dl.confidence.capacity);
    if (ul) conf($('r-up-conf'), `confidence ${ul.confidence.capacity}`, ul.confidence.capacity);
    $('r-idle').textContent = fmt(result.idle.latency_ms, 0);
    conf($('r-idle-rpm'), `${fmt(result.idle.rpm, 0)} RPM idle`);
    $('r-down-rpm').textContent = dl ? fmt(dl.rpm, 0) : '–';
    $('r-up-rpm').textContent = ul ? fmt(ul.rpm, 0) : '–';
    if (dl) conf($('r-down-rpm-conf'), `${fmt(dl.loaded_latency_ms, 0)} ms loaded, confidence ${dl.confidence.rpm}`, dl.confidence.rpm);
    if (ul) conf($('r-up-rpm-conf'), `${fmt(ul.loaded_latency_ms, 0)} ms loaded, confidence ${ul.confidence.rpm}`, ul.confidence.rpm);
    $('r-proto').textContent = result.protocol;
    $('r-proto-detail').textContent = Object.entries(result.protocols).map(([p, n]) => `${p}: ${n} requests`).join(', ');
    $('card').hidden = false;
  }

  // ------------------------------------------------------------------ coordinator

  async function getToken(coordinator) {
    const deadline = performance.now() + TOKEN_WAIT_MS;
    for (;;) {
      const res = await fetch(`${coordinator}/api/token`, {
        method: 'POST', cache: 'no-store', headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ client: 'browser', schema: SCHEMA, page: location.origin + location.pathname }),
      });
      if (res.ok) {
        const body = await res.json();
        if (!body || typeof body.token !== 'string' || !body.token) throw new Error('coordinator: no token in its answer');
        return body.token;
      }
      if (res.status !== 409) throw new Error(`coordinator: token request answered HTTP ${res.status}`);
      if (performance.now() > deadline) throw new Error(`coordinator busy (409) for ${TOKEN_WAIT_MS / 1000} s: another test is running`);
      setPhase('token', 'Another test is running; waiting for the coordinator…');
      await sleep(2000);
    }
  }

  async function postResult(coordinator, token, result) {
    const url = `${coordinator}/api/result/${encodeURIComponent(token)}`;
    const body = JSON.stringify(result);
    let res;
    try {
      res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    } catch (_) {
      // A coordinator that does not answer the CORS preflight still takes a simple request.
      res = await fetch(url, { method: 'POST', headers: { 'content-type': 'text/plain' }, body });
    }
    if (!res.ok) throw new Error(`coordinator: result upload answered HTTP ${res.status}`);
    return res.status;
  }

  // ------------------------------------------------------------------ the test

  // The responsiveness config (`GET /.well-known/nq`), or the server's synthetic endpoints.
  // A URL on this page's host is taken on this page's origin, so every request shares the
  // scheme, port and connection the page was loaded with.
  async function loadConfig() {
    const abs = (u) => new URL(u, location.href);
    const rebase = (u) => {
      const url = abs(u);
      return url.hostname === location.hostname ? new URL(url.pathname + url.search, location.origin).href : url.href;
    };
    try {
      const res = await fetch('/.well-known/nq', { cache: 'no-store' });
      if (res.ok) {
        const doc = await res.json();
        const u = doc && doc.urls;
        if (u && u.small_download_url && u.large_download_url && u.upload_url) {
          return { source: '/.well-known/nq', small: rebase(u.small_download_url), large: rebase(u.large_download_url), upload: rebase(u.upload_url) };
        }
      }
    } catch (_) { /* no config document: the fallback below */ }
    return { source: 'fallback', small: abs(FALLBACK_URLS.small).href, large: abs(FALLBACK_URLS.large).href, upload: abs(FALLBACK_URLS.upload).href };
  }

  // The load origins: `https://load<i>.<page's host>` (same scheme and port), when the server
  // has them: the first must answer the configuration document cross-origin within
  // LOAD_CHECK_MS. Otherwise (none declared, the synthetic fallback endpoints, which do not
  // answer cross-origin, or load_origins=0) the load runs on the page's own origin: streams of
  // the page's one connection, as the page's probes are. Returns {origins, note}.
  async function findLoadOrigins(config, P) {
    if (!P.load_origins) return { origins: [], note: 'load_origins=0: the load runs on the page\'s own connection' };
    if (config.source === 'fallback') return { origins: [], note: 'no /.well-known/nq: the load runs on the page\'s own connection' };
    const port = location.port ? `:${location.port}` : '';
    const origins = [];
    for (let i = 1; i <= P.load_origins; i++) origins.push(`${location.protocol}//load${i}.${location.hostname}${port}`);
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), LOAD_CHECK_MS);
    try {
      const res = await fetch(`${origins[0]}/.well-known/nq`, { cache: 'no-store', signal: controller.signal });
      await res.arrayBuffer();
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      return { origins, note: null };
    } catch (err) {
      const why = controller.signal.aborted ? `no answer within ${LOAD_CHECK_MS / 1000} s` : String((err && err.message) || err);
      return { origins: [], note: `load origin ${origins[0]} unavailable (${why}): the load runs on the page's own connection` };
    } finally {
      clearTimeout(timer);
    }
  }

  // `url`'s path and query on `origin`.
  const onOrigin = (url, origin) => { const u = new URL(url); return new URL(u.pathname + u.search, origin).href; };

  async function measureIdle(config, P) {
    setPhase('idle', 'Measuring idle latency…');
    const origin = performance.now();
    const probes = [];
    for (let i = 0; i < P.idle_probes; i++) {
      await probe(config.small, origin, null, probes);
      progress.latency_ms = probes[probes.length - 1].rtt_ms;
      showGauges();
    }
    await sleep(100); // the last Resource Timing entries
    const latency = median(probes.map((p) => p.rtt_ms));
    progress.rpm = 60000 / latency;
    showGauges();
    return { latency_ms: round(latency), rpm: round(60000 / latency, 1), probes };
  }

  // One direction: load-generating requests added one per interval until goodput is stable,
  // self probes at MPS, responsiveness over the last MAD intervals once goodput is stable,
  // until responsiveness is stable too or the time limit.
  async function runDirection(direction, config, P, loadOrigins) {
    setPhase(direction, direction === 'download' ? 'Download: saturating the link…' : 'Upload: saturating the link…');
    const controller = new AbortController();
    const { signal } = controller;
    const origin = performance.now();
    const limitMs = P.max_duration_s * 1000;
    const intervalMs = P.interval_s * 1000;
    const body = direction === 'upload' ? new Uint8Array(P.upload_body_bytes) : null;
    for (let at = 0; body && at < body.length; at += 65536) crypto.getRandomValues(body.subarray(at, at + 65536));
    const state = { bytes: 0, generators: 0, errors: [], warnings: [], probesSent: 0, probesFailed: 0 };
    const probes = [];
    const intervals = [];
    const intervalBytes = [];
    const averages = [];
    const rpms = [];
    let saturatedAt = null;
    let stableAt = null;
    let lastBytes = 0;
    let lastT = origin;
    const starts = []; // when each interval began
    const durations = []; // how long each lasted, s
    const onBytes = (n) => { state.bytes += n; };
    // Load-generating connection i (from 0) on load origin i (modulo their number), or on the
    // page's origin. It first GETs the small object there (the connection's set-up, as the CLI
    // connects first), then counts as active: the self probes go to a random active one.
    const hosts = [];
    const active = [];
    const addGenerator = () => {
      const base = loadOrigins.length ? loadOrigins[state.generators % loadOrigins.length] : location.origin;
      state.generators += 1;
      hosts.push(new URL(base).hostname);
      const small = onOrigin(config.small, base);
      const start = async () => {
        const res = await fetch(small, { cache: 'no-store', signal });
        await res.arrayBuffer();
        if (!res.ok) throw new Error(`load connection ${base}: HTTP ${res.status}`);
        if (!active.includes(small)) active.push(small);
        return direction === 'download'
          ? downloadLoop(onOrigin(config.large, base), signal, onBytes)
          : uploadLoop(onOrigin(config.upload, base), body, signal, onBytes);
      };
      start().catch((err) => { if (!signal.aborted) state.errors.push(String(err && err.message ? err.message : err)); });
    };
    const sendProbe = () => {
      if (!active.length) return; // no load-generating connection yet: nothing to probe
      state.probesSent += 1;
      const url = active[Math.floor(Math.random() * active.length)];
      timing.urls.add(url);
      probe(url, origin, signal, probes).then((p) => {
        if (p) { progress.latency_ms = p.rtt_ms; showGauges(); }
      }).catch((err) => { state.probesFailed += 1; state.errors.push(String(err && err.message ? err.message : err)); });
    };
    addGenerator();
    sendProbe();
    const probeTimer = setInterval(sendProbe, 1000 / P.mps);
    const tick = setInterval(() => {
      progress.elapsed_s = (performance.now() - origin) / 1000;
      $('bar-fill').style.width = `${Math.min(100, (100 * progress.elapsed_s) / P.max_duration_s)}%`;
      drawChart(intervals, probes, P.max_duration_s);
    }, 250);

    try {
      for (let i = 1; ; i++) {
        // Each interval is timed from the end of the previous one: a page whose timers run
        // late (a machine short of CPU) gets longer intervals, never a burst of empty ones.
        await sleep(lastT + intervalMs - performance.now());
        const now = performance.now();
        const bytes = state.bytes;
        const delta = bytes - lastBytes;
        const seconds = (now - lastT) / 1000;
        const goodput = (delta * 8) / seconds;
        starts.push(lastT);
        durations.push(seconds);
        if (seconds > 1.5 * P.interval_s) {
          state.warnings.push(`interval ${i - 1} lasted ${seconds.toFixed(2)} s instead of ${P.interval_s} s: the page's timers ran late`);
        }
        lastBytes = bytes;
        lastT = now;
        intervalBytes.push(delta);
        // The moving average: the bytes of the last MAD intervals "divided by MAD times ID"
        // (so that the first intervals' averages are low and saturation cannot be declared
        // before MAD intervals have run), as protolab-net rpm computes it; by the intervals'
        // actual length when that is longer (late timers).
        const span = Math.max(sum(durations.slice(-P.mad)), P.mad * P.interval_s);
        const average = (sum(intervalBytes.slice(-P.mad)) * 8) / span;
        averages.push(average);
        const goodputStd = averages.length >= P.mad ? stddev(averages.slice(-P.mad)) : null;
        if (saturatedAt === null && goodputStd !== null && average > 0 && goodputStd < (P.sdt / 100) * average) saturatedAt = i;
        const since = starts[Math.max(0, starts.length - P.mad)];
        const window_ = probes.filter((p) => p.t_ms + origin >= since && p.rtt_ms !== null);
        const tm = window_.length ? trimmedMean(window_.map((p) => p.rtt_ms), P.tmp) : null;
        const rpm = tm ? 60000 / tm : null;
        let rpmStd = null;
        if (saturatedAt !== null && rpm !== null) {
          rpms.push(rpm);
          if (rpms.length >= P.mad) {
            rpmStd = stddev(rpms.slice(-P.mad));
            if (rpmStd < (P.sdt / 100) * rpm) stableAt = i;
          }
        }
        intervals.push({
          index: i - 1, t_s: round((now - origin) / 1000), duration_s: round(seconds), bytes: delta, total_bytes: bytes,
          goodput_bps: round(goodput, 0), moving_average_bps: round(average, 0),
          goodput_std_bps: round(goodputStd, 0), saturated: saturatedAt !== null, load_generators: state.generators,
          probes: window_.length, trimmed_mean_ms: round(tm), rpm: round(rpm, 1), rpm_std: round(rpmStd, 1),
        });
        Object.assign(progress, { direction, intervals: intervals.length, goodput_bps: average, rpm, load_generators: state.generators });
        showGauges();
        $('status').textContent = `${direction === 'download' ? 'Download' : 'Upload'}: ${fmt(average / 1e6)} Mbit/s, ` +
          `${saturatedAt === null ? 'saturating' : 'goodput stable, measuring responsiveness'}…`;
        if (stableAt !== null || now - origin >= limitMs) break;
        if (saturatedAt === null && state.generators < P.mnp) addGenerator();
      }
    } finally {
      clearInterval(probeTimer);
      clearInterval(tick);
      controller.abort();
    }
    const end = performance.now();
    await sleep(100); // the last probes' Resource Timing entries
    // The reported responsiveness: the trimmed mean of the probes of the last MAD intervals.
    const lastFrom = starts.length ? starts[Math.max(0, starts.length - P.mad)] : origin;
    const last = probes.filter((p) => p.t_ms + origin >= lastFrom && p.rtt_ms !== null);
    const tm = last.length ? trimmedMean(last.map((p) => p.rtt_ms), P.tmp) : null;
    const capacity = averages.length ? averages[averages.length - 1] : null;
    if (!state.bytes && state.errors.length) throw new Error(`${direction}: ${state.errors[0]}`);
    if (!probes.length && state.probesSent) {
      state.errors.push(`none of ${state.probesSent} probes was answered: the connection stopped answering requests`);
    }
    drawChart(intervals, probes, P.max_duration_s);
    return {
      capacity_bps: round(capacity, 0),
      rpm: tm ? round(60000 / tm, 1) : null,
      loaded_latency_ms: round(tm),
      confidence: { capacity: confidence(saturatedAt !== null, intervals.length, P.mad), rpm: confidence(stableAt !== null, rpms.length, P.mad) },
      stop: stableAt !== null ? 'stable' : 'time_limit',
      saturated_at: saturatedAt === null ? null : saturatedAt - 1,
      goodput_stable_at_s: saturatedAt === null ? null : intervals[saturatedAt - 1].t_s,
      rpm_stable_at_s: stableAt === null ? null : intervals[stableAt - 1].t_s,
      duration_s: round((end - origin) / 1000),
      bytes: state.bytes,
      load_generators: state.generators,
      load_hosts: hosts,
      // Probes sent; failed; unfinished when the direction ended (aborted then).
      probe_counts: { sent: state.probesSent, failed: state.probesFailed, unfinished: state.probesSent - state.probesFailed - probes.length },
      errors: state.errors.slice(0, 10),
      warnings: state.warnings.slice(0, 10),
      intervals,
      probes,
    };
  }

  function dominantProtocol(counts, fallback) {
    const entries = Object.entries(counts).sort((a, b) => b[1] - a[1]);
    return entries.length ? entries[0][0] : fallback;
  }

  async function run() {
    const coordinator = (query.get('coordinator') || '').replace(/\/+$/, '') || null;
    document.body.dataset.state = 'running';
    $('start').disabled = true;
    $('error').hidden = true;
    $('card').hidden = true;
    const startedUnixMs = Date.now();
    const t0 = performance.now();
    let token = null;
    try {
      const P = readParameters();
      orderPhases(P.directions);
      if (coordinator) {
        setPhase('token', 'Asking the coordinator for a token…');
        token = await getToken(coordinator);
      }
      setPhase('config', 'Reading the server configuration…');
      const config = await loadConfig();
      for (const u of [config.small, config.large, config.upload]) timing.urls.add(u);
      const load = await findLoadOrigins(config, P);
      const idle = await measureIdle(config, P);
      const directions = {};
      for (const d of P.directions) {
        if (Object.keys(directions).length) await sleep(500); // let the queue of the previous phase drain
        directions[d] = await runDirection(d, config, P, load.origins);
      }
      const navigation = performance.getEntriesByType('navigation')[0];
      const pageProtocol = navigation ? protocolName(navigation.nextHopProtocol) : 'unknown';
      const result = {
        schema: SCHEMA, schema_version: SCHEMA_VERSION,
        protocol: dominantProtocol(timing.protocols, pageProtocol),
        protocols: { ...timing.protocols },
        page_protocol: pageProtocol,
        page: location.origin + location.pathname,
        // The RPM is the self-probe RPM: a browser cannot open the draft's foreign probes.
        probes: 'self',
        load_origins: load.origins.map((o) => new URL(o).hostname),
        load_note: load.note,
        urls: { source: config.source, small_download_url: config.small, large_download_url: config.large, upload_url: config.upload },
        token,
        started_unix_ms: startedUnixMs,
        duration_s: round((performance.now() - t0) / 1000),
        idle,
        directions,
        parameters: P,
        user_agent: navigator.userAgent,
      };
      window.speedtestResult = result;
      setPhase('finished', 'Done.');
      showCard(result);
      if (coordinator && token) {
        try {
          await postResult(coordinator, token, result);
          window.speedtestUpload = { ok: true, coordinator, token };
          $('r-upload').textContent = `Result stored by the coordinator (token ${token}).`;
        } catch (err) {
          window.speedtestUpload = { ok: false, coordinator, token, error: String(err.message || err) };
          $('r-upload').textContent = `The coordinator did not take the result: ${err.message || err}`;
        }
      } else {
        $('r-upload').textContent = 'No coordinator: the result stays in this page.';
      }
      document.body.dataset.state = 'done';
    } catch (err) {
      const message = String((err && err.message) || err);
      window.speedtestError = message;
      document.body.dataset.error = message;
      $('error').textContent = `The test failed: ${message}`;
      $('error').hidden = false;
      setPhase('error', 'Failed.');
      if (coordinator && token) {
        // Release the coordinator's lock with what happened.
        const failed = { schema: SCHEMA, schema_version: SCHEMA_VERSION, token, error: message, user_agent: navigator.userAgent };
        await postResult(coordinator, token, failed).catch(() => {});
      }
      document.body.dataset.state = 'error';
    } finally {
      $('start').disabled = false;
    }
  }

  function init() {
    timing.observe();
    $('start').addEventListener('click', () => { run(); });
    const auto = query.get('autostart');
    if (auto === '1' || auto === 'true') run();
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', init);
  else init();
})();
