// The Lakejoin search page: talks to /lakejoin/api/* with the Airflow UI's session cookie.
"use strict";

const $ = (id) => document.getElementById(id);
let lake = { datasets: [] };
let lastSearch = null;

function setStatus(text, isError = false) {
  $("status").textContent = text;
  $("status").className = isError ? "error" : "";
}

async function api(path, options = {}) {
  const response = await fetch(path, { credentials: "same-origin", ...options });
  if (!response.ok) {
    let detail = response.statusText;
    try { detail = JSON.stringify((await response.json()).detail); } catch (e) { /* not JSON */ }
    throw new Error(`${response.status}: ${detail}`);
  }
  return response;
}

function cell(row, content) {
  const td = document.createElement("td");
  if (content instanceof Node) td.appendChild(content); else td.textContent = content ?? "";
  row.appendChild(td);
  return td;
}

function showColumns(names) {
  const box = $("columns");
  box.replaceChildren(document.createTextNode("columns: "));
  for (const name of names) {
    const label = document.createElement("label");
    const input = document.createElement("input");
    input.type = "checkbox"; input.value = name; input.className = "column";
    label.append(input, " " + name);
    box.appendChild(label);
  }
}

// The dataset's latest Great Expectations validation: its Data Docs page (the API redirects).
function qualityHref(datasetId) {
  return `quality/${encodeURIComponent(datasetId)}`;
}

function qualityLink(datasetId) {
  const link = document.createElement("a");
  link.href = qualityHref(datasetId);
  link.target = "_blank";
  link.className = "quality";
  link.textContent = "latest validation";
  return link;
}

function datasetColumns() {
  const found = lake.datasets.find((d) => d.dataset_id === $("dataset").value);
  showColumns(found ? found.columns.map((c) => c.name) : []);
  $("dataset-quality").hidden = !found;
  if (found) $("dataset-quality").href = qualityHref(found.dataset_id);
}

async function loadLake() {
  const data = await (await api("api/datasets")).json();
  lake = data;
  $("snapshot").textContent = `Snapshot ${data.snapshot_id}: ${data.datasets.length} datasets, indexes: ${data.families.join(", ") || "none"}`;
  $("dataset").replaceChildren(...data.datasets.map((d) => new Option(`${d.title} (${d.dataset_id})`, d.dataset_id)));
  datasetColumns();
}

async function uploadColumns() {
  if (!$("file").files.length) return;
  $("source-upload").checked = true;
  const form = new FormData();
  form.append("file", $("file").files[0]);
  try {
    showColumns((await (await api("api/columns", { method: "POST", body: form })).json()).columns);
  } catch (error) { setStatus(error.message, true); }
}

function request(extra) {
  const columns = [...document.querySelectorAll("input.column:checked")].map((c) => c.value);
  let params;
  try { params = JSON.parse($("params").value || "{}"); } catch (e) { throw new Error("parameters are not valid JSON"); }
  const fields = { method: $("method").value, columns, k: Number($("k").value), params, ...extra };
  if ($("source-upload").checked) {
    const form = new FormData();
    form.append("file", $("file").files[0]);
    for (const [name, value] of Object.entries(fields)) {
      if (value !== null && value !== undefined) form.append(name, typeof value === "string" ? value : JSON.stringify(value));
    }
    return { method: "POST", body: form };
  }
  return { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ ...fields, dataset_id: $("dataset").value }) };
}

// As the CLI shows scores: counts as integers, shares with three decimals, "≥" only for PEXESO's
// lower-bound mode and "≈" only for an unverified LSH Ensemble estimate.
function score(result) {
  const share = (value) => Number(value).toFixed(3);
  const count = (value) => Number(value).toLocaleString("en-US");
  if (result.overlap !== undefined) return `overlap ${count(result.overlap)} (containment ${share(result.containment)})`;
  if (result.share !== undefined) return `${count(result.joinability)} keys (share ${share(result.share)})`;
  if (result.matched !== undefined) return `jn ${result.joinability_exact ? "" : "≥ "}${share(result.joinability)} (${count(result.matched)} records)`;
  if (result.containment !== undefined && result.containment !== null) return `containment ${share(result.containment)}`;
  if (result.containment_estimate !== undefined) return `containment ≈ ${share(result.containment_estimate)}`;
  return "";
}

function evidence(result) {
  const parts = [];
  if (result.matched_sample) parts.push("matched: " + JSON.stringify(result.matched_sample));
  if (result.sample_pairs) parts.push("pairs: " + JSON.stringify(result.sample_pairs));
  if (result.mapping) parts.push("mapping: " + Object.entries(result.mapping).map(([q, m]) => `${q}→${m.column}`).join(", "));
  if (result.containment_estimate !== undefined && result.containment !== undefined) parts.push(`estimate ${result.containment_estimate}`);
  if (result.model) parts.push(`model ${result.model}`);
  return parts.join("; ");
}

async function search() {
  setStatus("Searching…");
  try {
    const data = await (await api("api/search", request({}))).json();
    lastSearch = data;
    const body = $("results").tBodies[0];
    body.replaceChildren();
    for (const result of data.results) {
      const row = body.insertRow();
      row.className = "result";
      cell(row, String(result.rank));
      cell(row, result.table);
      cell(row, Array.isArray(result.column) ? result.column.join(", ") : result.column);
      cell(row, score(result));
      cell(row, evidence(result)).className = "evidence";
      const actions = document.createElement("span");
      for (const [label, format] of [["Preview", "json"], ["Parquet", "parquet"], ["CSV", "csv"]]) {
        const button = document.createElement("button");
        button.textContent = label;
        button.className = `join-${format}`;
        button.addEventListener("click", () => joinResult(result.rank, format));
        actions.appendChild(button);
      }
      cell(row, actions);
      cell(row, qualityLink(result.dataset_id));
    }
    $("results").hidden = false;
    const picked = data.auto ? ` (auto: ${data.auto.reason})` : "";
    setStatus(`Snapshot ${data.snapshot_id}, ${data.method}${picked}: ${data.results.length} result(s) in ${data.seconds} s`);
  } catch (error) { setStatus(error.message, true); }
}

async function joinResult(rank, format) {
  setStatus(format === "json" ? "Joining…" : `Preparing the ${format} download…`);
  const options = { rank, how: $("how").value, policy: $("policy").value, transform: $("transform").value || null, format, snapshot_id: lastSearch.snapshot_id };
  try {
    const response = await api("api/join", request(options));
    if (format !== "json") {
      const link = document.createElement("a");
      link.href = URL.createObjectURL(await response.blob());
      link.download = (response.headers.get("Content-Disposition") || "").split('filename="')[1]?.replace('"', "") || `joined.${format}`;
      link.click();
      setStatus(`Downloaded ${link.download}`);
      return;
    }
    const data = await response.json();
    const columns = data.columns;
    const head = $("preview").tHead;
    head.replaceChildren();
    const headRow = head.insertRow();
    for (const name of columns) { const th = document.createElement("th"); th.textContent = name; headRow.appendChild(th); }
    const body = $("preview").tBodies[0];
    body.replaceChildren();
    for (const record of data.preview) {
      const row = body.insertRow();
      row.className = "preview-row";
      for (const name of columns) cell(row, record[name] === null ? "" : String(record[name]));
    }
    $("preview").hidden = false;
    $("preview-info").textContent = `Joined ${data.result.table} (rank ${rank}, ${data.method}, snapshot ${data.snapshot_id}): ${data.rows} rows, showing ${data.preview.length}`;
    setStatus("Join ready");
  } catch (error) { setStatus(error.message, true); }
}

$("dataset").addEventListener("change", () => { $("source-dataset").checked = true; datasetColumns(); });
$("source-dataset").addEventListener("change", datasetColumns);
$("file").addEventListener("change", uploadColumns);
$("search").addEventListener("click", search);
loadLake().catch((error) => setStatus(error.message, true));
