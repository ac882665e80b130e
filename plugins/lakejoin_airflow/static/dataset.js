// The dataset page: profile, related tables from the join graph, neighbourhood picture, join preview.
"use strict";

const $ = (id) => document.getElementById(id);
const datasetId = new URLSearchParams(location.search).get("id");

async function getJson(path, options = {}) {
  const response = await fetch(path, { credentials: "same-origin", ...options });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.detail || response.statusText);
  return body;
}

function cell(row, text, className) {
  const td = row.insertCell();
  td.textContent = text;
  if (className) td.className = className;
  return td;
}

function pairsText(columns) { return columns.map(([mine, theirs]) => `${mine} = ${theirs}`).join(", "); }

function share(value) { return value === null || value === undefined ? "" : value.toFixed(3); }

function evidenceText(entry) {
  const e = entry.evidence;
  if (entry.method === "josie") return `overlap ${e.overlap}; containment ${share(e.containment)} (this in other), ${share(e.containment_reverse)} (other in this); Jaccard ${share(e.jaccard)}`;
  if (entry.method === "mate") return `${e.joinability} joinable key tuples (${share(e.share)} of the key's)`;
  return `semantic: ${e.matched} values matched (${share(e.joinability)})`;
}

function containmentOf(entry) {
  const e = entry.evidence;
  return entry.method === "mate" ? e.share : (entry.method === "josie" ? Math.max(e.containment, e.containment_reverse) : e.joinability);
}

function showProfile(profile) {
  $("title").textContent = profile.title || profile.dataset_id;
  document.title = `Lakejoin · ${profile.title || profile.dataset_id}`;
  const body = $("profile").tBodies[0];
  for (const c of profile.columns) {
    const row = body.insertRow();
    cell(row, c.name); cell(row, c.type); cell(row, c.distinct, "num"); cell(row, c.nulls, "num");
    cell(row, c.key_candidate ? "key" : ""); cell(row, (c.indexed_by || []).join(", "));
  }
}

function groupByColumns(related) {
  const groups = new Map();
  for (const entry of related) {
    const key = entry.columns.map(([mine]) => mine).join(" + ");
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push(entry);
  }
  return groups;
}

function relatedTable(headers) {
  const table = document.createElement("table");
  table.className = "data related";
  const head = table.createTHead().insertRow();
  for (const text of headers) { const th = document.createElement("th"); th.scope = "col"; th.textContent = text; head.append(th); }
  return table;
}

function tableRow(body, entry, cells) {
  const row = body.insertRow();
  row.dataset.dataset = entry.dataset_id;
  const link = document.createElement("a");
  link.href = `dataset?id=${encodeURIComponent(entry.dataset_id)}`;
  link.textContent = entry.table || entry.dataset_id;
  row.insertCell().append(link);
  for (const [text, className] of cells) cell(row, text, className);
  const button = document.createElement("button");
  button.type = "button";
  button.className = "preview-join";
  button.textContent = "Preview join";
  button.addEventListener("click", () => previewJoin(entry));
  row.insertCell().append(button);
  return row;
}

function methodText(entry) { return (entry.semantic ? "semantic " : "") + entry.method; }

function alsoText(entry) {
  const folded = entry.also.map((j) => `${methodText(j)} ${pairsText(j.columns)} (${j.quality.toFixed(2)})`);
  return folded.length ? `Also: ${folded.join("; ")}` : "";
}

// Quality order: each neighbour table once, best join first, its other joins folded under it.
function showByQuality(box, answer) {
  const table = relatedTable(["Table", "Quality", "Method", "Joins on", "Why", ""]);
  const body = table.createTBody();
  for (const entry of answer.related) {
    const row = tableRow(body, entry, [[entry.quality.toFixed(2), "num"], [methodText(entry)], [pairsText(entry.columns)], [entry.reason]]);
    row.title = alsoText(entry);
  }
  box.append(table);
  if (answer.weak.length) {
    const note = document.createElement("p");
    note.className = "hint";
    note.textContent = `${answer.weak.length} more tables join weakly: ${answer.weak.slice(0, 8).map((e) => `${e.table || e.dataset_id} (${e.reason})`).join("; ")}${answer.weak.length > 8 ? "; …" : ""}`;
    box.append(note);
  }
}

// Raw overlap order: every edge, grouped by this table's joining columns.
function showByOverlap(box, answer) {
  for (const [columns, entries] of groupByColumns(answer.related)) {
    const heading = document.createElement("h3");
    heading.textContent = columns;
    const table = relatedTable(["Table", "Method", "Joins on", "Evidence", ""]);
    const body = table.createTBody();
    for (const entry of entries) tableRow(body, entry, [[entry.method], [pairsText(entry.columns)], [evidenceText(entry)]]);
    box.append(heading, table);
  }
}

function showRelated(answer) {
  const box = $("related");
  box.replaceChildren();
  if (!answer.related.length) { box.textContent = "No related table in this snapshot's join graph."; return; }
  (answer.rank === "overlap" ? showByOverlap : showByQuality)(box, answer);
}

function svg(name, attributes, text) {
  const element = document.createElementNS("http://www.w3.org/2000/svg", name);
  for (const [key, value] of Object.entries(attributes)) element.setAttribute(key, value);
  if (text !== undefined) element.textContent = text;
  return element;
}

function showNeighbourhood(answer, title) {
  const picture = $("neighbourhood");
  picture.replaceChildren();
  const strongest = new Map();  // neighbour dataset -> its entries
  for (const entry of answer.related) {
    if (!strongest.has(entry.dataset_id)) strongest.set(entry.dataset_id, []);
    strongest.get(entry.dataset_id).push(entry);
  }
  const neighbours = [...strongest.entries()].slice(0, answer.rank === "overlap" ? 24 : 12);
  neighbours.forEach(([dataset, entries], i) => {
    const angle = (2 * Math.PI * i) / neighbours.length - Math.PI / 2;
    const x = 270 * Math.cos(angle), y = 190 * Math.sin(angle);
    const width = 1 + 9 * Math.max(...entries.map((e) => (answer.rank === "overlap" ? containmentOf(e) : e.quality)));
    const line = svg("line", { x1: 0, y1: 0, x2: x, y2: y, "stroke-width": width.toFixed(1), stroke: "currentColor", "stroke-opacity": "0.45", class: "edge" });
    line.append(svg("title", {}, entries.map((e) => `${e.method}: ${pairsText(e.columns)}`).join("\n")));
    picture.append(line);
    const link = svg("a", { href: `dataset?id=${encodeURIComponent(dataset)}`, class: "neighbour" });
    link.append(svg("circle", { cx: x, cy: y, r: 6, fill: "currentColor" }));
    link.append(svg("text", { x, y: y - 10, "text-anchor": "middle", "font-size": 12, fill: "currentColor" }, entries[0].table || dataset));
    picture.append(link);
  });
  picture.append(svg("circle", { cx: 0, cy: 0, r: 10, fill: "currentColor" }));
  picture.append(svg("text", { x: 0, y: 26, "text-anchor": "middle", "font-size": 14, "font-weight": "bold", fill: "currentColor" }, title));
}

async function previewJoin(entry) {
  $("preview-card").hidden = false;
  $("preview-summary").textContent = `Joining with ${entry.table}…`;
  $("preview").replaceChildren();
  try {
    await showJoin(entry);
  } catch (error) {
    $("preview-summary").textContent = `Could not preview the join with ${entry.table}: ${error.message}`;
  }
}

async function showJoin(entry) {
  const columns = entry.columns.map(([mine]) => mine);
  const found = await getJson("api/search", { method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ method: entry.method, dataset_id: datasetId, columns, k: 50 }) });
  const others = entry.columns.map(([, theirs]) => theirs).join(",");
  const rank = found.results.findIndex((r) => r.dataset_id === entry.dataset_id && [r.column].flat().join(",") === others) + 1
    || found.results.findIndex((r) => r.dataset_id === entry.dataset_id) + 1;
  if (!rank) { $("preview-summary").textContent = `${entry.table} is not among the search's first 50 results any more.`; return; }
  const joined = await getJson("api/join", { method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ method: entry.method, dataset_id: datasetId, columns, rank, k: 50, format: "json", preview_rows: 10 }) });
  $("preview-summary").textContent = `Joined with ${entry.table} on ${pairsText(entry.columns)} (${entry.method}): ${joined.rows} rows.`;
  const table = document.createElement("table");
  table.className = "data join-preview";
  const names = joined.preview.length ? Object.keys(joined.preview[0]) : [];
  const head = table.createTHead().insertRow();
  for (const name of names) { const th = document.createElement("th"); th.textContent = name; head.append(th); }
  const body = table.createTBody();
  for (const record of joined.preview) { const row = body.insertRow(); for (const name of names) cell(row, record[name] ?? ""); }
  $("preview").replaceChildren(table);
}

async function load(rank) {
  const answer = await getJson(`api/datasets/${encodeURIComponent(datasetId)}/related?rank=${rank}`);
  showRelated(answer);
  showNeighbourhood(answer, $("title").textContent);
  return answer;
}

async function main() {
  if (!datasetId) { $("status").textContent = "No dataset given: open this page as dataset?id=…"; return; }
  try {
    const [profile, answer] = await Promise.all([getJson(`api/datasets/${encodeURIComponent(datasetId)}/columns`), getJson(`api/datasets/${encodeURIComponent(datasetId)}/related?rank=${$("rank").value}`)]);
    $("rank").addEventListener("change", () => load($("rank").value).catch((error) => { $("status").textContent = `Could not rank: ${error.message}`; }));
    showProfile(profile);
    $("keys").textContent = answer.composite_keys.length ? `Composite keys: ${answer.composite_keys.map((k) => `(${k.join(", ")})`).join("; ")}` : "No composite key found.";
    const graph = answer.graph;
    $("status").textContent = `Snapshot ${answer.snapshot_id} · ${profile.rows ?? "?"} rows · ${answer.related.length} related` + (graph.current ? "" : ` · ${graph.note}`);
    showNeighbourhood(answer, profile.title || datasetId);
    showRelated(answer);
  } catch (error) {
    $("status").textContent = `Could not load the dataset: ${error.message}`;
  }
}

main();
