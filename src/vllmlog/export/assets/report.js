/* vllmlog report: draws the embedded charts with uPlot, makes tables sortable and filterable.
   Log-derived text is already escaped in the HTML; chart data is read from a JSON script element and
   only ever reaches the page as numbers on a canvas. */
(function () {
  "use strict";
  var appStart = (window.performance && performance.now) ? performance.now() : 0;
  var data = { charts: {}, windows: [], time: null };
  try {
    data = JSON.parse(document.getElementById("vllmlog-data").textContent);
  } catch (e) {
    console.error("vllmlog: cannot read report data", e);
  }
  var SEV = { info: "#1f5fa8", warning: "#b26a00", error: "#c62828", critical: "#7a0916" };
  var SHADE = { info: "rgba(31,95,168,0.04)", warning: "rgba(178,106,0,0.06)", error: "rgba(198,40,40,0.06)",
                critical: "rgba(122,9,22,0.08)" };
  var FONT = "12px system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif";
  var INT_INCRS = [1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 2500, 5000, 10000, 20000, 50000, 1e5, 2e5, 5e5, 1e6];
  var AXIS_W = 64;           // every time chart: same y-axis width, so the x positions line up
  var full = data.time ? [data.time.min, data.time.max] : null;
  var windows = data.windows || [];
  var timePlots = [], allPlots = [];
  var rendered = 0, failed = 0, syncing = false, ready = false;

  function fmtSec(v) {
    if (v == null) { return "–"; }
    if (v === 0) { return "0"; }
    var a = Math.abs(v);
    if (a >= 100) { return Math.round(v).toLocaleString("en-US") + " s"; }
    if (a >= 1) { return v.toFixed(2) + " s"; }
    if (a >= 0.01) { return (v * 1000).toFixed(0) + " ms"; }
    return (v * 1000).toFixed(1) + " ms";
  }
  function fmtTick(v) { return fmtSec(v).replace(/\.0+ /, " ").replace(/(\.\d*?)0+ /, "$1 "); }
  function fmtNum(v) {
    if (v == null) { return "–"; }
    return Math.abs(v) >= 100 ? Math.round(v).toLocaleString("en-US") : String(Math.round(v * 100) / 100);
  }
  function fullPadded() {
    var pad = (full[1] - full[0]) * 0.01;
    return [full[0] - pad, full[1] + pad];
  }
  function utc(ts) { return uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC"); }
  function widthOf(div) { return Math.max(320, div.clientWidth - 2); }

  function clipToPlot(u) {
    var ctx = u.ctx, b = u.bbox;
    ctx.save();
    ctx.beginPath();
    ctx.rect(b.left, b.top, b.width, b.height);
    ctx.clip();
    return ctx;
  }

  // lanes: overlapping windows get different rows of the strip above the plot (greedy, by start)
  var lanes = [], laneEnds = [];
  windows.forEach(function (w) {
    var l = 0;
    while (l < laneEnds.length && laneEnds[l] >= w.start) { l++; }
    laneEnds[l] = Math.max(w.end, w.start);
    lanes.push(l);
  });
  var nLanes = laneEnds.length;
  var SEV_ORDER = ["info", "warning", "error", "critical"];

  // incident windows behind the series (drawClear runs before the axes and lines are drawn): one light
  // fill per severity over the union of its windows (overlaps do not darken), worst severity on top
  function shadeWindows(u) {
    if (!windows.length) { return; }
    var ctx = clipToPlot(u), b = u.bbox, px = uPlot.pxRatio;
    SEV_ORDER.forEach(function (sev) {
      var any = false;
      ctx.beginPath();
      windows.forEach(function (w) {
        if (w.severity !== sev) { return; }
        var x0 = u.valToPos(w.start, "x", true), x1 = u.valToPos(w.end, "x", true);
        ctx.rect(x0, b.top, Math.max(x1 - x0, 3 * px), b.height);
        any = true;
      });
      if (any) { ctx.fillStyle = SHADE[sev]; ctx.fill(); }
    });
    ctx.restore();
  }

  // above the plot: each window as a strip in its lane, its onset numbered like the list above the
  // charts; in the plot: the onset line and the labelled threshold lines, on top of the series
  function drawMarks(u, spec) {
    var ctx = u.ctx, b = u.bbox, px = uPlot.pxRatio, lastRight = -1;
    ctx.save();
    ctx.font = Math.round(11 * px) + "px system-ui, sans-serif";
    ctx.textAlign = "left";
    ctx.textBaseline = "top";
    var x0p = b.left, x1p = b.left + b.width;
    windows.forEach(function (w, i) {
      var col = SEV[w.severity] || SEV.info;
      var xa = Math.max(x0p, u.valToPos(w.start, "x", true)), xb = Math.min(x1p, u.valToPos(w.end, "x", true));
      var ly = b.top - (lanes[i] + 1) * 5 * px;
      if (xb >= x0p && xa <= x1p) {
        ctx.fillStyle = col;
        ctx.fillRect(xa, ly, Math.max(xb - xa, 3 * px), 4 * px);
      }
      var x = Math.round(u.valToPos(w.onset, "x", true)) + 0.5;
      if (x < x0p - 1 || x > x1p + 1) { return; }
      ctx.strokeStyle = col;
      ctx.lineWidth = 1.5 * px;
      ctx.beginPath(); ctx.moveTo(x, ly); ctx.lineTo(x, b.top + b.height); ctx.stroke();
      var label = String(i + 1), tw = ctx.measureText(label).width + 8 * px;
      var lx = Math.max(x - tw / 2, lastRight + 2 * px);
      lastRight = lx + tw;
      var ty = b.top - (nLanes * 5 + 16) * px;
      ctx.fillStyle = col;
      ctx.fillRect(lx, ty, tw, 14 * px);
      ctx.fillStyle = "#fff";
      ctx.fillText(label, lx + 4 * px, ty + 1 * px);
    });
    ctx.restore();
    ctx = clipToPlot(u);
    ctx.font = Math.round(11 * px) + "px system-ui, sans-serif";
    (spec.thresholds || []).forEach(function (t) {
      var y = Math.round(u.valToPos(t.value, t.scale, true)) + 0.5;
      ctx.strokeStyle = t.color; ctx.lineWidth = 1 * px; ctx.setLineDash([6 * px, 4 * px]);
      ctx.beginPath(); ctx.moveTo(b.left, y); ctx.lineTo(b.left + b.width, y); ctx.stroke();
      ctx.setLineDash([]);
      ctx.textAlign = "right"; ctx.textBaseline = "top";
      var tw = ctx.measureText(t.label).width;
      var ty = y + 2 * px;  // just below its line: the space above a critical line near the top is too small
      ctx.fillStyle = "rgba(255,255,255,0.85)";
      ctx.fillRect(b.left + b.width - tw - 8 * px, ty, tw + 6 * px, 14 * px);
      ctx.fillStyle = t.color;
      ctx.fillText(t.label, b.left + b.width - 5 * px, ty + 1 * px);
    });
    ctx.restore();
  }

  // time ticks in the log's clock (24 h), the date under the first tick and at each new day
  function timeTicks(u, splits, axisIdx, space, incr) {
    var prevDay = null;
    return splits.map(function (v) {
      var iso = new Date(v * 1000).toISOString(), day = iso.slice(5, 10);
      var s = incr >= 86400 ? iso.slice(0, 10) : incr >= 60 ? iso.slice(11, 16) : incr < 1 ? iso.slice(11, 22) : iso.slice(11, 19);
      if (incr < 86400 && day !== prevDay) { s += "\n" + day; prevDay = day; }
      return s;
    });
  }

  function yRange(cfg) {
    return function (u, mn, mx) {
      if (cfg.max != null) { return [cfg.min != null ? cfg.min : 0, cfg.max]; }
      var hi = (mx == null || !isFinite(mx) || mx <= 0) ? 1 : mx * 1.08;
      return [cfg.min != null ? cfg.min : (mn < 0 ? mn * 1.08 : 0), hi];
    };
  }

  function syncZoom(u, key) {
    if (key !== "x" || syncing || !ready) { return; }
    syncing = true;
    var mn = u.scales.x.min, mx = u.scales.x.max;
    timePlots.forEach(function (o) { if (o !== u) { o.setScale("x", { min: mn, max: mx }); } });
    syncing = false;
  }

  function timeChart(div, spec) {
    var tables = spec.series.map(function (s) { return [s.x, s.y]; });
    var aligned = tables.length === 1 ? tables[0] : uPlot.join(tables);
    var scaleKey = Object.keys(spec.scales)[0];
    var scaleCfg = spec.scales[scaleKey];
    var isPct = scaleKey === "pct";
    var series = [{ value: "{YYYY}-{MM}-{DD} {HH}:{mm}:{ss}" }];
    spec.series.forEach(function (s) {
      var o = { label: s.label, stroke: s.color, width: 1.6, scale: s.scale, spanGaps: false,
                value: function (u, v) { return v == null ? "–" : (isPct ? fmtNum(v) + " %" : fmtNum(v)); } };
      if (s.dash) { o.dash = s.dash; }
      if (s.step) { o.paths = uPlot.paths.stepped({ align: 1 }); }
      if (s.bars) {
        o.paths = uPlot.paths.bars({ size: [s.label.indexOf("arrivals") >= 0 ? 0.9 : 0.5, Infinity, 1] });
        o.fill = s.color + "b0"; o.width = 0; o.points = { show: false };
      }
      series.push(o);
    });
    // not auto: the x range is the whole run (set right after creation) until someone zooms
    var scales = { x: { time: true, auto: false,
                        range: function (u, mn, mx) { return mn == null || mx == null ? fullPadded() : [mn, mx]; } } };
    scales[scaleKey] = { range: yRange(scaleCfg) };
    var axes = [
      { font: FONT, stroke: "#555", grid: { stroke: "#eceef2" }, ticks: { stroke: "#ccc" }, size: 44,
        values: timeTicks },
      { scale: scaleKey, label: scaleCfg.label, labelFont: FONT, font: FONT, size: AXIS_W, labelSize: 18,
        stroke: "#555", grid: { stroke: "#eceef2" }, ticks: { stroke: "#ccc" },
        values: function (u, splits) { return splits.map(function (v) { return isPct ? v + " %" : fmtNum(v); }); } }
    ];
    if (isPct) { axes[1].splits = function () { return [0, 20, 40, 60, 80, 100]; }; }
    if (scaleCfg.integer) { axes[1].incrs = INT_INCRS; }
    var opts = {
      width: widthOf(div), height: spec.height, series: series, scales: scales, axes: axes, tzDate: utc,
      padding: [windows.length ? 20 + nLanes * 5 : 8, 30, 0, 0],
      legend: { live: true },
      cursor: { sync: { key: "vllmlog-time" }, drag: { x: true, y: false } },
      hooks: { drawClear: [shadeWindows], draw: [function (u) { drawMarks(u, spec); }], setScale: [syncZoom] }
    };
    var u = new uPlot(opts, aligned, div);
    var r = fullPadded();
    u.setScale("x", { min: r[0], max: r[1] });
    timePlots.push(u);
    return u;
  }

  function histChart(div, spec) {
    var e = spec.edges, c = spec.counts, xs = [], ys = [], markers = [];
    (spec.markers || []).forEach(function (m) {  // equal percentiles share one line: "p50 = p90 250 ms"
      var last = markers[markers.length - 1];
      if (last && last.value === m.value) { last.label += " = " + m.label; } else { markers.push({ label: m.label, value: m.value }); }
    });
    for (var i = 0; i < c.length; i++) { xs.push((e[i] + e[i + 1]) / 2); ys.push(c[i]); }
    var w = e[1] - e[0];
    if (xs.length === 1) {  // one bar: zero-height neighbours give it its width
      xs = [xs[0] - w, xs[0], xs[0] + w]; ys = [0, ys[0], 0];
    }
    var lo = e[0], hi = e[e.length - 1];
    markers.forEach(function (m) { lo = Math.min(lo, m.value); hi = Math.max(hi, m.value); });
    var pad = (hi - lo) * 0.04 || w;
    if (xs.length === 3 && c.length === 1) { lo = e[0] - 1.5 * w; hi = e[1] + 1.5 * w; pad = 0; }
    var xr = [lo - pad, hi + pad];
    var opts = {
      width: widthOf(div), height: spec.height,
      series: [{ value: function (u, v) { return v == null ? "–" : fmtSec(v); } },
               { label: "requests", stroke: spec.color, fill: spec.color + "c0", width: 0, points: { show: false },
                 paths: uPlot.paths.bars({ size: [1, Infinity, 1], gap: 1 }),
                 value: function (u, v) { return v == null ? "–" : String(v); } }],
      scales: { x: { time: false, range: function () { return xr; } }, y: { range: yRange({ min: 0 }) } },
      axes: [
        { font: FONT, stroke: "#555", grid: { stroke: "#eceef2" },
          values: function (u, splits) { return splits.map(fmtTick); } },
        { font: FONT, stroke: "#555", size: 48, grid: { stroke: "#eceef2" },
          incrs: INT_INCRS,
          values: function (u, splits) { return splits.map(fmtNum); } }
      ],
      legend: { live: true },
      cursor: { drag: { x: false, y: false } },
      hooks: { draw: [function (u) {
        var ctx = clipToPlot(u), b = u.bbox, px = uPlot.pxRatio;
        ctx.font = Math.round(11 * px) + "px system-ui, sans-serif";
        ctx.textAlign = "left";
        ctx.textBaseline = "top";
        markers.forEach(function (m, k) {
          var x = Math.round(u.valToPos(m.value, "x", true)) + 0.5;
          ctx.strokeStyle = "#222"; ctx.lineWidth = 1.2 * px;
          ctx.setLineDash(k === 0 ? [] : k === 1 ? [6 * px, 3 * px] : [2 * px, 2 * px]);
          ctx.beginPath(); ctx.moveTo(x, b.top); ctx.lineTo(x, b.top + b.height); ctx.stroke();
          ctx.setLineDash([]);
          var t = m.label + " " + fmtSec(m.value), tw = ctx.measureText(t).width;
          var tx = x + 3 * px + tw > b.left + b.width ? x - tw - 3 * px : x + 3 * px;
          ctx.fillStyle = "rgba(255,255,255,0.85)";
          ctx.fillRect(tx - 2 * px, b.top + (2 + 15 * k) * px, tw + 4 * px, 14 * px);
          ctx.fillStyle = "#222";
          ctx.fillText(t, tx, b.top + (3 + 15 * k) * px);
        });
        ctx.restore();
      }] }
    };
    return new uPlot(opts, [xs, ys], div);
  }

  var nodes = document.querySelectorAll("div.plot[data-chart]");
  Array.prototype.forEach.call(nodes, function (div) {
    var spec = (data.charts || {})[div.getAttribute("data-chart")];
    var holder = div.querySelector(".plot-area") || div;
    if (!spec || typeof uPlot === "undefined") {
      failed += 1; holder.textContent = "chart unavailable"; return;
    }
    try {
      var u = spec.kind === "hist" ? histChart(holder, spec) : timeChart(holder, spec);
      allPlots.push([u, holder]);
      rendered += 1;
      div.setAttribute("data-rendered", "1");
    } catch (err) {
      failed += 1;
      holder.textContent = "chart unavailable";
      console.error("vllmlog: chart " + div.id + " failed", err);
    }
  });
  ready = true;
  // double-click on any time chart: every time chart back to the whole run
  timePlots.forEach(function (u) {
    u.over.addEventListener("dblclick", function () {
      var r = fullPadded();
      timePlots.forEach(function (o) { o.setScale("x", { min: r[0], max: r[1] }); });
    });
  });
  var resizeTimer = null;
  window.addEventListener("resize", function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(function () {
      allPlots.forEach(function (p) { p[0].setSize({ width: widthOf(p[1]), height: p[0].height }); });
    }, 100);
  });
  window.vllmlogPlots = { time: timePlots, all: allPlots.map(function (p) { return p[0]; }) };
  document.body.setAttribute("data-charts-rendered", String(rendered));
  document.body.setAttribute("data-charts-failed", String(failed));
  if (window.performance && performance.now) {
    var now = performance.now();
    document.body.setAttribute("data-ready-ms", String(Math.round(now)));
    document.body.setAttribute("data-timing", "scripts " + Math.round(appStart) + " ms, charts " +
                               Math.round(now - appStart) + " ms");
  }

  function cellValue(tr, i, type) {
    var td = tr.children[i];
    if (!td) { return type === "n" ? -Infinity : ""; }
    if (type === "n") {
      var v = td.getAttribute("data-v");
      if (v === null || v === "") { v = td.textContent.replace(/[^0-9.eE+-]/g, ""); }
      var n = parseFloat(v);
      return isNaN(n) ? -Infinity : n;
    }
    return td.textContent.toLowerCase();
  }
  Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (table) {
    var ths = table.querySelectorAll("thead th");
    Array.prototype.forEach.call(ths, function (th, i) {
      function sort() {
        var type = th.getAttribute("data-type") || "s";
        var asc = !th.classList.contains("asc");
        Array.prototype.forEach.call(ths, function (o) { o.classList.remove("asc", "desc"); });
        th.classList.add(asc ? "asc" : "desc");
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = cellValue(a, i, type), y = cellValue(b, i, type);
          return (x < y ? -1 : x > y ? 1 : 0) * (asc ? 1 : -1);
        });
        var frag = document.createDocumentFragment();
        rows.forEach(function (r) { frag.appendChild(r); });
        body.appendChild(frag);
      }
      th.addEventListener("click", sort);
      th.addEventListener("keydown", function (ev) { if (ev.key === "Enter") { sort(); } });
    });
  });
  var filter = document.getElementById("req-filter");
  var reqTable = document.getElementById("req-table");
  if (filter && reqTable) {
    filter.addEventListener("input", function () {
      var q = filter.value.toLowerCase().trim();
      Array.prototype.forEach.call(reqTable.tBodies[0].rows, function (r) {
        r.style.display = (!q || r.textContent.toLowerCase().indexOf(q) >= 0) ? "" : "none";
      });
    });
  }
})();
