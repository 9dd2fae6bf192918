// Draw the tutorials' plotly figures (the application/vnd.plotly.v1+json outputs) with the
// plotly.js copied into this site's _static: nothing is fetched from a CDN.
(function () {
  function draw() {
    document.querySelectorAll("script.nbprof-plotly-spec").forEach(function (script) {
      var div = script.previousElementSibling;
      if (!div || div.dataset.drawn) return;
      var spec = JSON.parse(script.textContent);
      div.dataset.drawn = "1";
      Plotly.newPlot(div, spec.data || [], spec.layout || {}, spec.config || {});
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", draw);
  else draw();
})();
