"""The HTML report's page: its style and script, inline (the page needs no network to be viewed).

The script builds everything from the report's data (a JSON script element): the summary, the
tensor table (a click on a column's header sorts by it, a second click reverses; `#sort=KEY` or
`#sort=KEY:desc` in the address sorts on load through the same click) and one SVG map per tensor
with a map. Each map cell is a <rect> carrying its bin (data-r, data-c) and its counts
(data-nan, data-posinf, data-neginf, data-missing): red NaN, green +Inf, blue -Inf, each channel
on a log scale of its own maximum; grey where only missing values are.
"""

STYLE = """
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1.5em;
       color: #1d1d1f; background: #fff; }
h1 { font-size: 1.4em; margin: 0 0 .3em; } h2 { font-size: 1.15em; margin: 1.4em 0 .5em; }
.status { display: inline-block; padding: .1em .6em; border-radius: .8em; font-weight: 600; }
.status.clean { background: #d7f5dd; } .status.found { background: #fbd5d5; }
.status.inconclusive, .status.interrupted { background: #fdecc8; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
th, td { padding: .25em .6em; border-bottom: 1px solid #e3e3e3; text-align: left;
         vertical-align: top; }
td.num, th.num { text-align: right; }
#tensors th { white-space: nowrap; cursor: pointer; user-select: none; background: #f4f4f6;
              position: sticky; top: 0; }
#tensors th[data-dir="asc"]::after { content: " \\25B2"; }
#tensors th[data-dir="desc"]::after { content: " \\25BC"; }
tr.finding td { background: #fff6f6; }
dl.summary { display: grid; grid-template-columns: repeat(4, max-content max-content);
             gap: .1em 1.2em; }
dl.summary dt { color: #555; }
dl.summary dd { margin: 0 1.5em 0 0; font-variant-numeric: tabular-nums; }
.maps { display: flex; flex-wrap: wrap; gap: 1.2em; }
figure.map { margin: 0; } figure.map svg { background: #111; image-rendering: pixelated;
             border: 1px solid #999; }
figure.map figcaption { font-size: .9em; max-width: 26em; }
.legend span { display: inline-block; width: .9em; height: .9em; vertical-align: middle;
               margin: 0 .3em 0 .8em; }
.note { color: #555; }
"""

SCRIPT = r"""
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("fpclass-data").textContent);
  const SVG = "http://www.w3.org/2000/svg";
  const el = (tag, attrs, text) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  };
  const fmt = (v) => v === null || v === undefined ? "" :
    typeof v === "number" && !Number.isInteger(v) ? String(Number(v.toPrecision(6))) :
    typeof v === "object" ? JSON.stringify(v) : String(v);

  // the summary
  const head = document.getElementById("head");
  head.appendChild(el("h1", {}, "fpclass scan report"));
  const badge = el("span", {class: "status " + data.status, id: "status"}, data.status);
  const p = el("p");
  p.append("Status: ", badge, " (exit code " + data.exit_code + "; fails on " +
           (data.fail_on.join(", ") || "nothing") + ")");
  head.appendChild(p);
  const dl = el("dl", {class: "summary", id: "summary"});
  for (const [k, v] of Object.entries(data.summary)) {
    dl.append(el("dt", {}, k.replace(/_/g, " ")), el("dd", {"data-key": k}, fmt(v)));
  }
  head.appendChild(dl);

  // the table of tensors
  const columns = data.columns;
  const table = document.getElementById("tensors");
  const hrow = el("tr");
  for (const c of columns) {
    hrow.appendChild(el("th", {"data-key": c.key, class: c.numeric ? "num" : ""}, c.label));
  }
  table.appendChild(el("thead")).appendChild(hrow);
  const body = table.appendChild(el("tbody"));
  data.tensors.forEach((t, i) => {
    const tr = el("tr", {"data-index": i, "data-file": t.file, "data-name": t.name});
    if (t.nan || t.posinf || t.neginf || t.missing) tr.className = "finding";
    for (const c of columns) {
      const v = t[c.key];
      const td = el("td", {"data-key": c.key, class: c.numeric ? "num" : ""});
      if (c.key === "name" && t.map_id !== undefined) {
        td.appendChild(el("a", {href: "#" + t.map_id}, fmt(v)));
      } else {
        td.textContent = Array.isArray(v) ? "(" + v.join(", ") + ")" : fmt(v);
      }
      tr.appendChild(td);
    }
    body.appendChild(tr);
  });
  const keyOf = (t, c) => {
    const v = t[c.key];
    if (c.numeric) return v === null || v === undefined ? -Infinity : Number(v);
    return Array.isArray(v) ? v.join(",") : String(v === null || v === undefined ? "" : v);
  };
  function sortBy(th) {
    const c = columns.find((x) => x.key === th.dataset.key);
    const dir = th.dataset.dir === "asc" ? "desc" : "asc";
    for (const h of hrow.children) delete h.dataset.dir;
    th.dataset.dir = dir;
    const rows = Array.from(body.children);
    rows.sort((a, b) => {
      const x = keyOf(data.tensors[a.dataset.index], c);
      const y = keyOf(data.tensors[b.dataset.index], c);
      const o = x < y ? -1 : x > y ? 1 : 0;
      return (dir === "asc" ? o : -o) || a.dataset.index - b.dataset.index;  // ties: as listed
    });
    for (const r of rows) body.appendChild(r);
    table.dataset.sorted = c.key + ":" + dir;
  }
  for (const th of hrow.children) th.addEventListener("click", () => sortBy(th));

  // the maps
  const maps = document.getElementById("maps");
  const CLASSES = ["nan", "posinf", "neginf", "missing"];
  data.tensors.forEach((t) => {
    if (!t.map) return;
    const m = t.map;
    const fig = el("figure", {class: "map", id: t.map_id, "data-file": t.file,
                              "data-name": t.name, "data-rows": m.rows,
                              "data-columns": m.columns});
    const cap = el("figcaption");
    cap.appendChild(el("strong", {}, t.name || t.file));
    cap.append(" (" + t.file + ", " + t.dtype + " " + "(" + t.shape.join(", ") + "))");
    if (m.note) {
      fig.dataset.note = m.note;
      cap.appendChild(el("div", {class: "note"}, m.note));
      fig.appendChild(cap);
      maps.appendChild(fig);
      return;
    }
    const br = m.row_edges.length - 1, bc = m.column_edges.length - 1;
    fig.dataset.binRows = br;
    fig.dataset.binColumns = bc;
    const scale = Math.max(1, Math.floor(256 / Math.max(br, bc)));
    const svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("viewBox", "0 0 " + bc + " " + br);
    svg.setAttribute("width", bc * scale);
    svg.setAttribute("height", br * scale);
    svg.setAttribute("shape-rendering", "crispEdges");
    const top = CLASSES.map((k, i) => Math.max(1, ...m.cells.map((cell) => cell[2 + i])));
    const level = (n, k) => n ? Math.round(80 + 175 * Math.log1p(n) / Math.log1p(top[k])) : 0;
    for (const cell of m.cells) {
      const [r, c] = cell;
      const rect = document.createElementNS(SVG, "rect");
      rect.setAttribute("x", c); rect.setAttribute("y", r);
      rect.setAttribute("width", 1); rect.setAttribute("height", 1);
      rect.setAttribute("data-r", r); rect.setAttribute("data-c", c);
      CLASSES.forEach((k, i) => rect.setAttribute("data-" + k, cell[2 + i]));
      let [R, G, B] = [level(cell[2], 0), level(cell[3], 1), level(cell[4], 2)];
      if (!R && !G && !B) R = G = B = level(cell[5], 3) / 2;
      rect.setAttribute("fill", "rgb(" + R + "," + G + "," + B + ")");
      const title = document.createElementNS(SVG, "title");
      title.textContent = "rows " + m.row_edges[r] + "-" + (m.row_edges[r + 1] - 1) +
        ", columns " + m.column_edges[c] + "-" + (m.column_edges[c + 1] - 1) + ": " +
        CLASSES.map((k, i) => k + " " + cell[2 + i]).join(", ");
      rect.appendChild(title);
      svg.appendChild(rect);
    }
    fig.appendChild(svg);
    cap.appendChild(el("div", {}, m.rows + " rows \u00d7 " + m.columns + " columns (" +
      m.layout + ") in " + br + " \u00d7 " + bc + " bins"));
    fig.appendChild(cap);
    maps.appendChild(fig);
  });
  if (data.maps_note) {
    maps.appendChild(el("p", {class: "note", id: "maps-note"}, data.maps_note));
  }

  // #sort=KEY[:desc] sorts on load, by the same clicks a reader makes
  const want = /(?:^#|&)sort=([^:&]+)(?::(asc|desc))?/.exec(location.hash);
  if (want) {
    const th = Array.from(hrow.children).find((h) => h.dataset.key === want[1]);
    if (th) {
      th.click();
      if (want[2] === "desc") th.click();
    }
  }
  document.body.dataset.ready = "1";
})();
"""
