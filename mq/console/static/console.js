// rocketredis console: live charts (uPlot) fed by the console's JSON, and small form helpers.
// No external requests: everything comes from this server.
(function () {
  "use strict";

  function fmtTime(sec) {
    return new Date(sec * 1000).toISOString().substring(11, 19);
  }

  // <figure class="chart" data-src="/api/overview/series" data-key="in_per_s" data-every="5"> … <div class="plot"></div>
  // The API answers a list of points {taken_at_ms, in_per_s, total_lag}; null is unknown (a gap).
  function startChart(fig) {
    var src = fig.dataset.src, key = fig.dataset.key, every = Number(fig.dataset.every || 5) * 1000;
    var box = fig.querySelector(".plot"), latest = fig.querySelector("output");
    var width = Math.min(460, Math.max(280, box.clientWidth || 460));
    var colour = fig.dataset.colour || "#0b5cad";
    var plot = new uPlot({
      width: width, height: 160,
      scales: { x: { time: true } },
      axes: [{ values: function (u, vals) { return vals.map(fmtTime); } }, {}],
      series: [{}, { label: fig.dataset.label || key, stroke: colour, width: 2, fill: colour + "14" }],
      legend: { show: false },
    }, [[], []], box);
    function refresh() {
      fetch(src, { headers: { "Accept": "application/json" }, credentials: "same-origin" })
        .then(function (r) { if (!r.ok) { throw new Error(r.status); } return r.json(); })
        .then(function (points) {
          var xs = points.map(function (p) { return p.taken_at_ms / 1000; });
          var ys = points.map(function (p) { return p[key]; });
          plot.setData([xs, ys]);
          if (latest) {
            var last = ys.length ? ys[ys.length - 1] : null;
            latest.textContent = last === null ? "unknown" : String(Math.round(last * 100) / 100);
          }
          fig.dataset.points = String(ys.length);
        })
        .catch(function () { if (latest) { latest.textContent = "unavailable"; } });
    }
    refresh();
    window.setInterval(refresh, every);
  }

  // <input type="checkbox" data-select-all="name">: ticks every checkbox called name in its form.
  function bindSelectAll(box) {
    box.addEventListener("change", function () {
      box.form.querySelectorAll('input[type=checkbox][name="' + box.dataset.selectAll + '"]').forEach(function (c) {
        c.checked = box.checked;
      });
    });
  }

  // <button data-confirm="text">: asks before a destructive POST.
  function bindConfirm(button) {
    button.addEventListener("click", function (event) {
      if (!window.confirm(button.dataset.confirm)) { event.preventDefault(); }
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    if (window.uPlot) { document.querySelectorAll("figure.chart[data-src]").forEach(startChart); }
    document.querySelectorAll("input[data-select-all]").forEach(bindSelectAll);
    document.querySelectorAll("button[data-confirm]").forEach(bindConfirm);
  });
})();
