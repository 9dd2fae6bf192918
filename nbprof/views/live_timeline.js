// The live timeline's browser side (nbprof/views/live_timeline.py): draws the figure the kernel
// sends, and asks the kernel again on zoom, span selection, hover and search.

function unzip(b64) {
  const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return new Response(stream).text();
}

// plotly.js once per page: the kernel sends the installed plotly's copy. Run with `define`,
// `module` and `exports` hidden so its UMD wrapper sets window.Plotly whatever loaders the page has.
function loadPlotly(model) {
  if (window.Plotly) return Promise.resolve(window.Plotly);
  if (!window.nbprofPlotly) {
    window.nbprofPlotly = new Promise((resolve, reject) => {
      const onMsg = async (msg) => {
        if (msg.type !== "plotly") return;
        model.off("msg:custom", onMsg);
        try {
          const src = await unzip(msg.source);
          new Function("define", "module", "exports", src).call(window, undefined, undefined, undefined);
          resolve(window.Plotly);
        } catch (e) {
          window.nbprofPlotly = null;
          reject(e);
        }
      };
      model.on("msg:custom", onMsg);
      model.send({ type: "plotly" });
    });
  }
  return window.nbprofPlotly;
}

const CSS = `
.nbprof-live{font-family:Inter,-apple-system,'Segoe UI',Roboto,Helvetica,Arial,sans-serif;font-size:12px;color:#1f2328}
.nbprof-live-bar{display:flex;gap:8px;align-items:center;flex-wrap:wrap;margin:2px 0 4px 0}
.nbprof-live-bar input{font-size:12px;padding:3px 6px;border:1px solid #c0c4cc;border-radius:4px;width:220px}
.nbprof-live-bar button{font-size:12px;padding:3px 8px;border:1px solid #c0c4cc;border-radius:4px;background:#f6f8fa;cursor:pointer}
.nbprof-live-bar button.on{background:#dbe7f5;border-color:#6f86aa}
.nbprof-live-status{color:#666}
.nbprof-live-find{color:#1f4f8f}
.nbprof-live-sel{margin-top:6px}
.nbprof-live-sel-head{margin:4px 0}
.nbprof-live-sel-table{display:inline-block;vertical-align:top;margin:0 24px 8px 0}
.nbprof-live-sel-table .t{font-weight:600;margin:2px 0}
.nbprof-live-sel-table table{border-collapse:collapse}
.nbprof-live-sel-table td,.nbprof-live-sel-table th{padding:2px 8px;text-align:right;border-bottom:1px solid #eee;white-space:nowrap}
.nbprof-live-sel-table td.n,.nbprof-live-sel-table th:first-child{text-align:left;max-width:520px;overflow:hidden;text-overflow:ellipsis}
.nbprof-live-sel-table .more{color:#888}
`;

// An element with its text and attributes. Names come from the trace: they are set as text and
// attribute values, never parsed as HTML.
function h(tag, text, attrs) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = text;
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  return e;
}

// A selected span's head line and tables (LiveTimelineState.select's data). A table: its title,
// rows of cells (text), "more" names left out; optionally its column heads ("columns"; default
// name, calls, in selection, total), which cells are names ("names": column indexes, default the
// first), each row's rank ("ranks": a data-rank attribute), and the rank it belongs to ("rank",
// "group": the tables of one rank together in a <details> headed by "group").
function selectionNodes(s) {
  const head = h("div", null, { class: "nbprof-live-sel-head" });
  head.append(h("b", "Selection"), " " + s.head);
  const out = [head];
  const groups = new Map();
  for (const t of s.tables) {
    const box = h("div", null, { class: "nbprof-live-sel-table", "data-table": t.title });
    const table = h("table");
    const headRow = h("tr");
    for (const c of t.columns || ["name", "calls", "in selection", "total"]) headRow.append(h("th", c));
    table.append(h("thead"), h("tbody"));
    table.tHead.append(headRow);
    const names = new Set(t.names || [0]);
    t.rows.forEach((cells, i) => {
      const row = h("tr", null, t.ranks ? { "data-rank": t.ranks[i] } : {});
      cells.forEach((cell, j) => {
        row.append(names.has(j)
          ? h("td", cell.length <= 90 ? cell : cell.slice(0, 89) + "…", { class: "n", title: cell })
          : h("td", cell));
      });
      table.tBodies[0].append(row);
    });
    box.append(h("div", t.title, { class: "t" }), table);
    if (t.more > 0) box.append(h("div", "+" + t.more + (t.more === 1 ? " more name" : " more names"), { class: "more" }));
    if (t.group === undefined) {
      out.push(box);
      continue;
    }
    if (!groups.has(t.group)) {
      const details = h("details", null, { class: "nbprof-live-sel-rank", "data-rank": t.rank });
      details.append(h("summary", t.group));
      groups.set(t.group, details);
      out.push(details);
    }
    groups.get(t.group).append(box);
  }
  return out;
}

function render({ model, el }) {
  const root = document.createElement("div");
  root.className = "nbprof-live";
  const style = document.createElement("style");
  style.textContent = CSS;
  const bar = document.createElement("div");
  bar.className = "nbprof-live-bar";
  const find = document.createElement("input");
  find.type = "search";
  find.placeholder = "find by name";
  find.className = "nbprof-live-search";
  const selectBtn = document.createElement("button");
  selectBtn.textContent = "Select span";
  selectBtn.title = "drag across the timeline to see that span's operators and kernels";
  selectBtn.className = "nbprof-live-select";
  const findStatus = document.createElement("span");
  findStatus.className = "nbprof-live-find";
  const status = document.createElement("span");
  status.className = "nbprof-live-status";
  status.textContent = "loading plotly.js…";
  bar.append(find, selectBtn, findStatus, status);
  const plot = document.createElement("div");
  plot.className = "nbprof-live-plot";
  const sel = document.createElement("div");
  sel.className = "nbprof-live-sel";
  root.append(style, bar, plot, sel);
  el.appendChild(root);

  let Plotly = null;
  let seq = 0; // the latest request: older answers are dropped
  let reacting = false; // our own redraw: its relayout events are not the user's
  let timer = null;
  let selecting = false;
  let flowKey = null;
  let resizer = null;
  let resizeTimer = null;
  let baseAnnotations = 0; // the figure's own annotations (track labels); the arrow goes after them

  const plotWidth = () => {
    const fl = plot._fullLayout;
    return fl ? Math.round(fl.width - fl.margin.l - fl.margin.r) : 1000;
  };

  async function draw(spec) {
    const layout = spec.layout;
    if (root.clientWidth) layout.width = root.clientWidth;
    layout.dragmode = selecting ? "select" : "zoom";
    layout.selectdirection = "h";
    reacting = true;
    try {
      await Plotly.react(plot, spec.data, layout, model.get("config"));
      baseAnnotations = (layout.annotations || []).length;
    } finally {
      reacting = false;
    }
  }

  function ask(msg) {
    msg.seq = ++seq;
    model.send(msg);
  }

  model.on("msg:custom", async (msg) => {
    if (msg.type === "spec") {
      if (msg.seq !== seq) return;
      await draw(msg.spec);
      if (msg.status !== undefined) status.textContent = msg.status;
      if (msg.find !== undefined) findStatus.textContent = msg.find;
      root.dataset.rendered = String(msg.seq);
    } else if (msg.type === "selection") {
      sel.replaceChildren(...selectionNodes(msg.selection));
    } else if (msg.type === "flow") {
      const f = msg.flow;
      if (!f) return;
      flowKey = f.x0 + ":" + f.x1;
      Plotly.relayout(plot, {
        [`annotations[${baseAnnotations}]`]: {
          x: f.x1, y: f.y1, ax: f.x0, ay: f.y0, xref: "x", yref: "y", axref: "x", ayref: "y",
          showarrow: true, arrowhead: 2, arrowsize: 1.2, arrowwidth: 1.6, arrowcolor: "#d7263d",
          text: "", name: "nbprof-flow",
        },
      });
      root.dataset.flow = flowKey;
    } else if (msg.type === "error") {
      status.textContent = "kernel: " + msg.text;
    }
  });

  function onRelayout(ev) {
    if (reacting || !ev) return;
    let x0, x1;
    if (ev["xaxis.range[0]"] !== undefined) {
      x0 = ev["xaxis.range[0]"];
      x1 = ev["xaxis.range[1]"];
    } else if (Array.isArray(ev["xaxis.range"])) {
      [x0, x1] = ev["xaxis.range"];
    } else if (ev["xaxis.autorange"]) {
      x0 = null;
      x1 = null;
    } else {
      return;
    }
    clearTimeout(timer);
    status.textContent = "drawing the window…";
    timer = setTimeout(() => ask({ type: "window", x0, x1, width_px: plotWidth() }), 120);
  }

  function onSelected(ev) {
    if (!ev || !ev.range || !ev.range.x) return;
    const [a, b] = ev.range.x;
    root.dataset.selection = Math.min(a, b) + "," + Math.max(a, b);
    model.send({ type: "select", x0: Math.min(a, b), x1: Math.max(a, b) });
  }

  function onHover(ev) {
    const pt = ev && ev.points && ev.points[0];
    if (!pt || !pt.data || pt.data.type !== "heatmap") return;
    const trace = plot.data.slice(0, pt.curveNumber + 1).filter((t) => t.type === "heatmap").length - 1;
    model.send({ type: "hover", trace, x: pt.x });
  }

  function onUnhover() {
    if (flowKey === null) return;
    flowKey = null;
    delete root.dataset.flow;
    if ((plot.layout.annotations || []).length > baseAnnotations) {
      Plotly.relayout(plot, { [`annotations[${baseAnnotations}]`]: null });
    }
  }

  find.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(() => ask({ type: "find", text: find.value }), 250);
  });
  selectBtn.addEventListener("click", () => {
    selecting = !selecting;
    selectBtn.classList.toggle("on", selecting);
    Plotly.relayout(plot, { dragmode: selecting ? "select" : "zoom", selectdirection: "h" });
  });

  loadPlotly(model).then(async (P) => {
    Plotly = P;
    const spec = model.get("spec");
    await draw(JSON.parse(JSON.stringify(spec)));
    status.textContent = "zoom to draw a window in full detail";
    plot.on("plotly_relayout", onRelayout);
    plot.on("plotly_selected", onSelected);
    plot.on("plotly_hover", onHover);
    plot.on("plotly_unhover", onUnhover);
    // the figure follows the output's width (not its height: a notebook output has none of its
    // own, views/figure.py), as the front ends' plotly renderers do for a plain figure
    let lastWidth = root.clientWidth;
    resizer = new ResizeObserver(() => {
      if (root.clientWidth === lastWidth || !root.clientWidth) return;
      lastWidth = root.clientWidth;
      clearTimeout(resizeTimer);
      resizeTimer = setTimeout(() => Plotly.relayout(plot, { width: root.clientWidth }), 100);
    });
    resizer.observe(root);
    root.dataset.rendered = "0";
  }).catch((e) => {
    status.textContent = "plotly.js did not load: " + e;
  });

  return () => {
    clearTimeout(timer);
    clearTimeout(resizeTimer);
    if (resizer) resizer.disconnect();
    if (Plotly) Plotly.purge(plot);
  };
}

export default { render };
