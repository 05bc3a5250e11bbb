/* vllmlog report: draws the embedded figures with Plotly, makes tables sortable and filterable.
   Log-derived text is already escaped in the HTML; figures are read from a JSON script element. */
(function () {
  "use strict";
  var appStart = (window.performance && performance.now) ? performance.now() : 0;
  var data = { figures: {} };
  try {
    data = JSON.parse(document.getElementById("vllmlog-data").textContent);
  } catch (e) {
    console.error("vllmlog: cannot read report data", e);
  }
  var rendered = 0, failed = 0;
  var config = { responsive: true, displaylogo: false, scrollZoom: false,
                 modeBarButtonsToRemove: ["lasso2d", "select2d"] };
  var nodes = document.querySelectorAll("div.plot[data-chart]");
  var pending = nodes.length;
  function done() {
    pending -= 1;
    if (pending <= 0) {
      document.body.setAttribute("data-charts-rendered", String(rendered));
      document.body.setAttribute("data-charts-failed", String(failed));
      if (window.performance && performance.now) {
        document.body.setAttribute("data-timing", "scripts " + Math.round(appStart) + " ms, charts " +
                                   Math.round(performance.now() - appStart) + " ms");
      }
    }
  }
  if (pending === 0) { done(); }
  Array.prototype.forEach.call(nodes, function (div) {
    var fig = data.figures[div.getAttribute("data-chart")];
    if (!fig || typeof Plotly === "undefined") {
      failed += 1; div.textContent = "chart unavailable"; done(); return;
    }
    Plotly.newPlot(div, fig.data, fig.layout, config).then(function () {
      rendered += 1; div.setAttribute("data-rendered", "1"); done();
    }, function (err) {
      failed += 1; console.error("vllmlog: chart " + div.id + " failed", err); done();
    });
  });

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
