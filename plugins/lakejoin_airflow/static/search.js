// The Lakejoin search page: talks to /lakejoin/api/* with the Airflow UI's session cookie.
// Sections: the lake's status, the query table (type-ahead picker or upload) and its columns,
// the method's form (built from GET api/methods), results, and the join preview.
"use strict";

const $ = (id) => document.getElementById(id);
const PAGE = 20;  // tables per page of the picker
const PROGRESS_AFTER_MS = 400;  // a search slower than this shows progress

const state = {
  forms: null,        // GET api/methods
  maxUpload: null,    // bytes, from GET api/status
  table: null,        // the chosen lake table {dataset_id, title, ...} or null
  upload: null,       // {name, rows} of the uploaded file
  columns: [],        // profiles of the query table's columns
  search: null,       // the last search's answer
  sort: { key: "rank", ascending: true },
  profiles: new Map(),  // dataset_id -> promise of its column profiles
};

// --- helpers ----------------------------------------------------------------------------

const count = (value) => Number(value).toLocaleString("en-US");

// A share as a whole percentage that never claims 100 % or 0 % it has not reached.
function percent(share) {
  if (share >= 1) return "100 %";
  if (share <= 0) return "0 %";
  const value = Math.round(share * 100);
  if (value === 0) return "< 1 %";
  return `${Math.min(value, 99)} %`;
}

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "className") node.className = value;
    else if (name === "text") node.textContent = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat(Infinity)) {
    if (child !== null && child !== undefined) node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

// An API error as one readable sentence (422 details are lists of field errors).
function errorText(status, detail) {
  if (Array.isArray(detail)) return detail.map((d) => `${(d.loc || []).filter((p) => p !== "body").join(".") || "request"}: ${d.msg}`).join("; ");
  if (typeof detail === "string") return detail;
  return `the server answered ${status}`;
}

class ApiError extends Error {
  constructor(status, detail) { super(errorText(status, detail)); this.status = status; }
}

async function api(path, options = {}) {
  const response = await fetch(path, { credentials: "same-origin", ...options });
  if (!response.ok) {
    let detail = response.statusText;
    try { detail = (await response.json()).detail; } catch (e) { /* not JSON */ }
    throw new ApiError(response.status, detail);
  }
  return response;
}

async function getJson(path) { return (await api(path)).json(); }

function showMessage(id, text, control) {
  $(id).textContent = text || "";
  if (control) {
    control.classList.toggle("invalid", Boolean(text));
    if (text) control.setAttribute("aria-invalid", "true"); else control.removeAttribute("aria-invalid");
    if (text) control.setAttribute("aria-describedby", id);
  }
}

function setStatus(id, text, isError = false) {
  $(id).textContent = text;
  $(id).classList.toggle("error", isError);
}

function bytes(n) {
  if (n >= 1024 * 1024) return `${(n / 1024 / 1024).toFixed(1)} MiB`;
  if (n >= 1024) return `${Math.round(n / 1024)} KiB`;
  return `${n} bytes`;
}

// --- the lake's status ------------------------------------------------------------------

const FAMILY_NAMES = { josie: "JOSIE", lshensemble: "LSH Ensemble", mate: "MATE", pexeso: "PEXESO", qgram: "q-gram", transform: "transformation" };

function describeLake(status) {
  const warm = status.warmup;
  if (warm.state === "failed") return `The lake could not be loaded: ${warm.error}`;
  if (warm.state !== "ready") {
    const what = warm.loading ? `the ${FAMILY_NAMES[warm.loading] || warm.loading} index` : "the catalog";
    return `Loading the lake in the background: ${what}…`;
  }
  const skipped = Object.keys(warm.skipped || {});
  const indexes = status.loaded_families.map((f) => FAMILY_NAMES[f] || f).join(", ") || "none";
  return `Snapshot ${status.snapshot_id} · ${count(status.tables)} tables · indexes ready: ${indexes}` + (skipped.length ? ` · not loaded: ${skipped.join(", ")}` : "");
}

async function watchLake() {
  try {
    const status = await getJson("api/status");
    state.maxUpload = status.max_upload_bytes;
    $("snapshot").textContent = describeLake(status);
    if (status.warmup.state === "loading") setTimeout(watchLake, 1000);
    return status;
  } catch (error) {
    $("snapshot").textContent = `The lake's status is unavailable: ${error.message}`;
    return null;
  }
}

// --- the type-ahead table picker (WAI-ARIA combobox) --------------------------------------

const picker = { query: "", offset: 0, tables: [], total: 0, active: -1, timer: null, request: 0 };

// "source · publisher · rows · columns" of a catalog entry (a profile lists its columns).
function tableMeta(table) {
  const columns = Array.isArray(table.columns) ? table.columns.length : table.columns;
  const parts = [table.source, table.publisher, table.rows !== null && table.rows !== undefined ? `${count(table.rows)} rows` : null, columns ? `${count(columns)} columns` : null];
  return parts.filter(Boolean).join(" · ");
}

function renderTableList() {
  const list = $("table-list");
  list.replaceChildren();
  picker.tables.forEach((table, i) => {
    const matched = table.matched_columns.length ? el("div", { className: "meta" }, "columns: ", table.matched_columns.join(", ")) : null;
    list.append(el("li", { id: `table-option-${i}`, role: "option", "aria-selected": String(i === picker.active), onmousedown: (e) => { e.preventDefault(); chooseTable(table); } },
      el("div", { className: "title" }, table.title || table.dataset_id), el("div", { className: "meta" }, tableMeta(table)), matched));
  });
  if (!picker.tables.length) list.append(el("li", { className: "empty", role: "option", "aria-disabled": "true", text: picker.query ? `No table matches “${picker.query}”` : "The lake has no tables yet" }));
  if (picker.tables.length < picker.total) {
    list.append(el("li", { id: "table-option-more", className: "more", role: "option", "aria-selected": String(picker.active === picker.tables.length), onmousedown: (e) => { e.preventDefault(); loadTables(true); } },
      `Show more (${count(picker.total - picker.tables.length)} left)`));
  }
  list.hidden = false;
  list.dataset.query = picker.query;  // which query the list answers (tests wait for it)
  $("table-search").setAttribute("aria-expanded", "true");
  const active = picker.active >= 0 ? list.children[picker.active] : null;
  if (active) { $("table-search").setAttribute("aria-activedescendant", active.id); active.scrollIntoView({ block: "nearest" }); } else $("table-search").removeAttribute("aria-activedescendant");
}

async function loadTables(more = false) {
  const request = ++picker.request;
  const offset = more ? picker.tables.length : 0;
  try {
    const page = await getJson(`api/catalog?q=${encodeURIComponent(picker.query)}&offset=${offset}&limit=${PAGE}`);
    if (request !== picker.request) return;  // a newer keystroke's answer wins
    picker.tables = more ? picker.tables.concat(page.tables) : page.tables;
    picker.total = page.total;
    if (!more) picker.active = -1;
    renderTableList();
  } catch (error) {
    showMessage("table-message", `Could not search the catalog: ${error.message}`, $("table-search"));
  }
}

function closeTableList() {
  $("table-list").hidden = true;
  $("table-search").setAttribute("aria-expanded", "false");
  $("table-search").removeAttribute("aria-activedescendant");
}

function onTableKey(event) {
  const options = picker.tables.length + (picker.tables.length < picker.total ? 1 : 0);
  if (event.key === "ArrowDown" || event.key === "ArrowUp") {
    event.preventDefault();
    if ($("table-list").hidden) { loadTables(); return; }
    const step = event.key === "ArrowDown" ? 1 : -1;
    picker.active = options ? (picker.active + step + options) % options : -1;
    renderTableList();
  } else if (event.key === "Enter" && picker.active >= 0) {
    event.preventDefault();
    if (picker.active < picker.tables.length) chooseTable(picker.tables[picker.active]); else loadTables(true);
  } else if (event.key === "Escape") {
    closeTableList();
  }
}

function onTableInput() {
  picker.query = $("table-search").value.trim();
  showMessage("table-message", "", $("table-search"));
  clearTimeout(picker.timer);
  picker.timer = setTimeout(() => loadTables(), 150);
}

async function chooseTable(table) {
  closeTableList();
  state.table = table;
  $("table-search").value = table.title || table.dataset_id;
  showMessage("table-message", "", $("table-search"));
  showChosen(table.title || table.dataset_id, tableMeta(table), table.dataset_id);
  try {
    const profile = await columnProfiles(table.dataset_id);
    showColumns(profile.columns);
  } catch (error) {
    showMessage("table-message", `Could not read the table's columns: ${error.message}`, $("table-search"));
  }
}

function columnProfiles(datasetId) {
  if (!state.profiles.has(datasetId)) {
    const promise = getJson(`api/datasets/${encodeURIComponent(datasetId)}/columns`);
    promise.catch(() => state.profiles.delete(datasetId));  // a failure is retried next time
    state.profiles.set(datasetId, promise);
  }
  return state.profiles.get(datasetId);
}

// The dataset's latest Great Expectations validation (its Data Docs page; the API redirects).
function qualityHref(datasetId) { return `quality/${encodeURIComponent(datasetId)}`; }

function showChosen(title, meta, datasetId) {
  const box = $("chosen-table");
  const id = datasetId ? el("details", {}, el("summary", { text: "show id" }), " ", el("code", { text: datasetId })) : null;
  const quality = datasetId ? el("a", { href: qualityHref(datasetId), target: "_blank", className: "quality", text: "latest validation" }) : null;
  box.replaceChildren(el("span", { className: "title", text: title }), id, el("div", { className: "meta" }, meta, quality ? " · " : "", quality));
  box.hidden = false;
}

// --- the query table's columns -------------------------------------------------------------

function keyText(column) {
  if (column.key_candidate === null || column.key_candidate === undefined) return "";
  return column.key_candidate ? "key" : "";
}

function showColumns(columns) {
  state.columns = columns;
  const body = $("columns").querySelector("tbody");
  body.replaceChildren();
  for (const column of columns) {
    const id = `column-${column.name}`.replace(/[^A-Za-z0-9_-]/g, "_") + `-${body.children.length}`;
    const nulls = column.nulls === null || column.nulls === undefined ? "" : `${count(column.nulls)}${column.null_fraction ? ` (${percent(column.null_fraction)})` : ""}`;
    body.append(el("tr", {},
      el("td", {}, el("input", { type: "checkbox", className: "column", value: column.name, id, onchange: () => { showMessage("columns-message", ""); explainAuto(); } })),
      el("td", {}, el("label", { for: id, text: column.name })),
      el("td", { text: [column.type, column.semantic_type].filter(Boolean).join(" · ") }),
      el("td", { className: "num", text: column.distinct === null || column.distinct === undefined ? "" : count(column.distinct) }),
      el("td", { className: "num", text: nulls }),
      el("td", {}, keyText(column) ? el("span", { className: "badge", title: "every value distinct, no nulls: a key candidate", text: "key" }) : "")));
  }
  $("columns").hidden = false;
  showMessage("columns-message", "");
  explainAuto();
}

function chosenColumns() {
  return [...document.querySelectorAll("input.column:checked")].map((c) => c.value);
}

async function uploadColumns() {
  const file = $("file").files[0];
  state.upload = null;
  $("columns").hidden = true;
  $("chosen-table").hidden = true;
  if (!file) return;
  if (state.maxUpload && file.size > state.maxUpload) {
    showMessage("file-message", `${file.name} is ${count(file.size)} bytes; uploads are limited to ${bytes(state.maxUpload)} (${count(state.maxUpload)} bytes). Search with a sample of its rows, or add the table to the lake.`, $("file"));
    return;
  }
  showMessage("file-message", "", $("file"));
  const form = new FormData();
  form.append("file", file);
  try {
    const data = await (await api("api/columns", { method: "POST", body: form })).json();
    state.upload = { name: file.name, rows: data.rows };
    showChosen(file.name, `your upload · ${count(data.rows)} rows · ${count(data.columns.length)} columns`, null);
    showColumns(data.columns);
  } catch (error) {
    const text = error.status === 413 ? `${file.name} is too large: ${error.message}` : `${file.name} could not be read: ${error.message}`;
    showMessage("file-message", text, $("file"));
  }
}

function useSource() {
  const upload = $("source-upload").checked;
  $("lake-picker").hidden = upload;
  $("upload-picker").hidden = !upload;
  $("columns").hidden = true;
  $("chosen-table").hidden = true;
  state.columns = [];
  showMessage("columns-message", "");
  if (upload) uploadColumns(); else if (state.table) chooseTable(state.table);
  explainAuto();
}

// --- the method's form ---------------------------------------------------------------------

function methodSpec() { return state.forms.methods.find((m) => m.name === $("method").value); }

function paramLabel(spec) {
  return { tau: "τ (distance)", T: "T (share to match)", initial_column: "Initial column", lower_bound: "Lower bounds only", semantic: "Semantic (by meaning)" }[spec.name]
    || spec.name.charAt(0).toUpperCase() + spec.name.slice(1).replace(/_/g, " ");
}

// One form field per parameter spec (type, default, bounds, help from lakejoin.query.params).
function paramField(spec, prefix) {
  const id = `${prefix}-${spec.name}`;
  const help = el("p", { className: "help", id: `${id}-help`, text: spec.help });
  const message = el("p", { className: "field-message", id: `${id}-message`, role: "alert" });
  let control;
  if (spec.type === "bool") {
    control = el("input", { type: "checkbox", id, "data-param": spec.name, "aria-describedby": `${id}-help`, checked: spec.default === true });
    return el("div", { className: "field check" }, control, " ", el("label", { for: id, text: paramLabel(spec) }), help, message);
  }
  if (spec.type === "choice" || (spec.choices && spec.choices.length && spec.type !== "str")) {
    control = el("select", { id, "data-param": spec.name, "aria-describedby": `${id}-help` }, spec.choices.map((c) => el("option", { value: c, selected: c === spec.default, text: c })));
  } else if (spec.type === "float" || spec.type === "int") {
    control = el("input", { type: "number", id, "data-param": spec.name, "aria-describedby": `${id}-help`, value: spec.default ?? "", min: spec.minimum ?? undefined, max: spec.maximum ?? undefined, step: spec.type === "int" ? "1" : "any" });
  } else {
    control = el("input", { type: "text", id, "data-param": spec.name, "aria-describedby": `${id}-help`, value: spec.default ?? "", list: spec.choices && spec.choices.length ? `${id}-choices` : undefined, placeholder: spec.choices && spec.choices.length ? `none, ${spec.choices.join(", ")} or a program` : "" });
  }
  const choices = spec.type === "str" && spec.choices && spec.choices.length ? el("datalist", { id: `${id}-choices` }, spec.choices.map((c) => el("option", { value: c }))) : null;
  return el("div", { className: "field" }, el("label", { for: id, text: paramLabel(spec) }), control, choices, help, message);
}

// The values of a form's fields as {name: value}, or null after marking the first bad field.
function readParams(container, specs) {
  const params = {};
  let valid = true;
  for (const spec of specs) {
    const control = container.querySelector(`[data-param="${spec.name}"]`);
    const message = `${control.id}-message`;
    showMessage(message, "", control);
    if (spec.type === "bool") {
      if (control.checked !== (spec.default === true)) params[spec.name] = control.checked;
      continue;
    }
    const raw = control.value.trim();
    if (raw === "") continue;  // the library's default
    if (spec.type === "float" || spec.type === "int") {
      const value = Number(raw);
      const bounded = (spec.minimum === null || value >= spec.minimum) && (spec.maximum === null || value <= spec.maximum);
      if (!Number.isFinite(value) || !bounded || (spec.type === "int" && !Number.isInteger(value))) {
        showMessage(message, `${paramLabel(spec)} must be ${spec.type === "int" ? "a whole number" : "a number"} from ${spec.minimum} to ${spec.maximum}`, control);
        if (valid) control.focus();
        valid = false;
        continue;
      }
      if (value !== spec.default) params[spec.name] = value;
    } else if (raw !== spec.default) {
      params[spec.name] = raw;
    }
  }
  return valid ? params : null;
}

function showMethodForm() {
  const spec = methodSpec();
  $("method-help").textContent = spec.help;
  $("method-form").replaceChildren(...spec.params.map((p) => paramField(p, "param")));
  for (const control of $("method-form").querySelectorAll("[data-param]")) control.addEventListener("change", explainAuto);
  explainAuto();
}

// What auto will pick for the chosen columns (the server's answer names its pick and reason).
function explainAuto() {
  const box = $("auto-pick");
  if (!state.forms || $("method").value !== "auto") { box.hidden = true; return; }
  const columns = chosenColumns();
  const semantic = $("method-form").querySelector('[data-param="semantic"]');
  let text;
  if (!columns.length) text = "Auto picks once you choose columns: JOSIE for one, MATE for several, PEXESO when semantic is on.";
  else if (semantic && semantic.checked) text = columns.length === 1 ? "Auto will run PEXESO: semantic matching of one column." : "Semantic search takes exactly one column.";
  else if (columns.length > 1) text = `Auto will run MATE: ${columns.length} columns form a composite key.`;
  else {
    const profile = state.columns.find((c) => c.name === columns[0]);
    const large = profile && profile.distinct >= state.forms.auto_lsh_min_distinct;
    text = large ? `Auto will run JOSIE (exact overlap, ranked by join quality) with LSH Ensemble estimates: ${columns[0]} has ${count(profile.distinct)} distinct values.` : `Auto will run JOSIE: exact overlap of ${columns[0]}'s distinct values, ranked by join quality.`;
  }
  box.textContent = text;
  box.hidden = false;
}

async function loadForms() {
  state.forms = await getJson("api/methods");
  $("method").replaceChildren(...state.forms.methods.map((m) => el("option", { value: m.name, text: m.title })));
  const k = state.forms.k;
  Object.assign($("k"), { min: k.minimum, max: k.maximum, value: k.default });
  $("join-form").replaceChildren(...state.forms.join.map((p) => paramField(p, "join")));
  showMethodForm();
}

// --- search ------------------------------------------------------------------------------

// The request body of a search or join, or null after showing what is missing next to it.
function request(extra) {
  const upload = $("source-upload").checked;
  if (upload ? !state.upload : !state.table) {
    if (upload) showMessage("file-message", "Choose a file to upload first.", $("file"));
    else showMessage("table-message", "Find and choose a table first: type part of its title.", $("table-search"));
    (upload ? $("file") : $("table-search")).focus();
    return null;
  }
  const columns = chosenColumns();
  if (!columns.length) {
    showMessage("columns-message", "Choose at least one column of your table to search with.");
    const first = document.querySelector("input.column");
    if (first) first.focus();
    return null;
  }
  const k = Number($("k").value);
  const kSpec = state.forms.k;
  if (!Number.isInteger(k) || k < kSpec.minimum || k > kSpec.maximum) {
    showMessage("k-message", `Results must be a whole number from ${kSpec.minimum} to ${kSpec.maximum}`, $("k"));
    $("k").focus();
    return null;
  }
  showMessage("k-message", "", $("k"));
  const params = readParams($("method-form"), methodSpec().params);
  if (params === null) return null;
  const fields = { method: $("method").value, columns, k, params, ...extra };
  if (upload) {
    const form = new FormData();
    form.append("file", $("file").files[0]);
    for (const [name, value] of Object.entries(fields)) {
      if (value !== null && value !== undefined) form.append(name, typeof value === "string" ? value : JSON.stringify(value));
    }
    return { method: "POST", body: form };
  }
  return { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ ...fields, dataset_id: state.table.dataset_id }) };
}

// Shows elapsed time (and what the server is loading) while `work` runs longer than a moment.
async function withProgress(label, work) {
  const started = Date.now();
  let lake = "";
  const tick = () => { $("progress-text").textContent = `${label} ${Math.floor((Date.now() - started) / 1000)} s${lake}`; };
  const show = setTimeout(() => { $("progress").hidden = false; tick(); }, PROGRESS_AFTER_MS);
  const ticker = setInterval(tick, 250);
  const poll = setInterval(async () => {
    try {
      const status = await getJson("api/status");
      lake = status.warmup.state === "loading" ? ` — the server is still loading ${status.warmup.loading ? `the ${FAMILY_NAMES[status.warmup.loading] || status.warmup.loading} index` : "the lake"}` : "";
    } catch (e) { lake = ""; }
  }, 1000);
  $("search").disabled = true;
  try {
    return await work();
  } finally {
    clearTimeout(show); clearInterval(ticker); clearInterval(poll);
    $("progress").hidden = true;
    $("search").disabled = false;
  }
}

async function search() {
  const options = request({});
  if (!options) return;
  setStatus("status", "");
  try {
    const data = await withProgress("Searching…", async () => (await api("api/search", options)).json());
    state.search = data;
    state.sort = { key: "rank", ascending: true };
    renderResults();
    const picked = data.auto ? `auto picked ${data.auto.picked.map((m) => FAMILY_NAMES[m] || m).join(" + ")} (${data.auto.reason})` : FAMILY_NAMES[data.method] || data.method;
    const itself = data.query.in_lake ? " · your table is in the lake: not listed" : "";
    $("results-summary").textContent = `${data.results.length} joinable ${data.results.length === 1 ? "table" : "tables"} for ${data.query.columns.join(", ")} of ${data.query.table} · ${picked} · snapshot ${data.snapshot_id} · ${data.seconds} s${itself}`;
    $("results-section").hidden = false;
    $("join-section").hidden = !data.results.length;
    setStatus("status", data.results.length ? "" : "No joinable table found. Try another column, or PEXESO for values that differ in spelling or format.");
  } catch (error) {
    setStatus("status", `Search failed: ${error.message}`, true);
  }
}

// --- results -------------------------------------------------------------------------------

// The score as a person reads it, a share for the bar, and a number to sort by.
function score(result) {
  if (result.overlap !== undefined && result.containment) {
    const total = Math.round(result.overlap / result.containment);
    return { text: `${count(result.overlap)} of ${count(total)} values, ${percent(result.containment)}`, share: result.containment, title: "distinct values of your column found in this column (JOSIE's overlap; the share is the containment)" };
  }
  if (result.share !== undefined && result.share) {
    const total = Math.round(result.joinability / result.share);
    return { text: `${count(result.joinability)} of ${count(total)} keys, ${percent(result.share)}`, share: result.share, title: "distinct key combinations of your columns found in this table (MATE's joinability)" };
  }
  if (result.matched !== undefined) {
    const bound = result.joinability_exact ? "" : "≥ ";
    const total = result.joinability ? Math.round(result.matched / result.joinability) : null;
    const of = total ? ` of ${count(total)}` : "";
    return { text: `${bound}${count(result.matched)}${of} rows matched, ${bound}${percent(result.joinability)}`, share: result.joinability, title: `your column's rows (non-empty) whose value has a close match by meaning (PEXESO's joinability${bound ? ", a lower bound" : ""})` };
  }
  if (result.containment !== undefined && result.containment !== null) {
    return { text: `${percent(result.containment)} of your values (exact)`, share: result.containment, title: "share of your distinct values in this column (verified)" };
  }
  if (result.containment_estimate !== undefined) {
    return { text: `≈ ${percent(result.containment_estimate)} of your values (estimate)`, share: result.containment_estimate, title: "LSH Ensemble's estimate of the share of your distinct values in this column" };
  }
  return { text: "", share: 0, title: "" };
}

function evidence(result) {
  const parts = [];
  if (result.quality !== undefined) parts.push(el("div", { className: "quality-reason", title: "join quality in [0, 1]: how worth making the join is (key-ness, containment, rarity of the shared values, type)", text: `join quality ${result.quality.toFixed(2)}: ${result.reason}` }));
  if (result.program) parts.push(el("div", {}, "program: ", el("span", { className: "value", text: result.program })));
  if (result.mapping) parts.push(el("div", {}, "key: ", Object.entries(result.mapping).map(([q, m]) => `${q}→${m.column}`).join(", ")));
  if (result.matched_sample && result.matched_sample.length) {
    const values = result.matched_sample.map((v) => el("span", { className: "value", text: Array.isArray(v) ? v.join(" · ") : String(v) }));
    parts.push(el("div", {}, "matched: ", values));
  }
  if (result.sample_pairs && result.sample_pairs.length) {
    const pairs = result.sample_pairs.map((p) => el("span", { className: "value", text: Array.isArray(p) ? `${p[0]} ≈ ${p[1]}` : JSON.stringify(p) }));
    parts.push(el("div", {}, "pairs: ", pairs));
  }
  if (result.containment_estimate !== undefined && result.overlap !== undefined) {
    parts.push(el("div", { text: result.containment_estimate === null ? "LSH Ensemble did not find it" : `LSH Ensemble estimate ${percent(result.containment_estimate)}` }));
  }
  if (result.model) parts.push(el("div", { text: `model ${result.model}` }));
  return parts;
}

// The table's cell: title, source (from its catalog entry, fetched once) and its links (the
// quality report; further pages about the table link from here).
function tableCell(result) {
  const source = el("div", { className: "source" });
  columnProfiles(result.dataset_id).then((p) => { source.textContent = tableMeta(p); }).catch(() => {});
  const links = el("div", { className: "links" }, el("a", { href: qualityHref(result.dataset_id), target: "_blank", className: "quality", text: "latest validation" }),
    " · ", el("a", { href: `dataset?id=${encodeURIComponent(result.dataset_id)}`, className: "related", text: "related tables" }));
  return el("td", {}, el("div", { className: "table-title", text: result.table || result.dataset_id }), source, links);
}

function columnCell(result) {
  const names = Array.isArray(result.column) ? result.column : [result.column];
  return el("td", {}, names.map((name, i) => [
    i ? ", " : "",
    el("span", { className: "column-name", tabindex: "0", "aria-describedby": "column-tip", "data-dataset": result.dataset_id, "data-column": name, text: name,
      onmouseenter: showColumnTip, onfocus: showColumnTip, onmouseleave: hideColumnTip, onblur: hideColumnTip }),
  ]));
}

async function showColumnTip(event) {
  const target = event.currentTarget;
  const tip = $("column-tip");
  tip.replaceChildren(el("div", { text: "Loading the column's profile…" }));
  const box = target.getBoundingClientRect();
  const section = $("results-section").getBoundingClientRect();
  Object.assign(tip.style, { left: `${box.left - section.left}px`, top: `${box.bottom - section.top + 4}px` });
  tip.hidden = false;
  try {
    const profile = await columnProfiles(target.dataset.dataset);
    const column = profile.columns.find((c) => c.name === target.dataset.column);
    if (!column || tip.hidden) return;
    const rows = [["type", [column.type, column.semantic_type].filter(Boolean).join(" · ")], ["distinct", count(column.distinct)], ["nulls", `${count(column.nulls ?? 0)}${column.null_fraction ? ` (${percent(column.null_fraction)})` : ""}`], ["key candidate", column.key_candidate ? "yes" : "no"], ["rows", profile.rows === null ? "" : count(profile.rows)]];
    tip.replaceChildren(el("strong", { text: `${profile.title} · ${column.name}` }), el("dl", {}, rows.map(([k, v]) => [el("dt", { text: k }), el("dd", { text: v })])));
  } catch (error) {
    tip.replaceChildren(el("div", { text: `No profile: ${error.message}` }));
  }
}

function hideColumnTip() { $("column-tip").hidden = true; }

const SORT_KEYS = {
  rank: (r) => r.rank,
  table: (r) => (r.table || "").toLowerCase(),
  column: (r) => (Array.isArray(r.column) ? r.column.join(", ") : r.column || "").toLowerCase(),
  score: (r) => score(r).share,
};

function renderResults() {
  const { key, ascending } = state.sort;
  const rows = [...state.search.results].sort((a, b) => {
    const x = SORT_KEYS[key](a), y = SORT_KEYS[key](b);
    return (x < y ? -1 : x > y ? 1 : a.rank - b.rank) * (ascending ? 1 : -1);
  });
  for (const th of $("results").tHead.rows[0].cells) {
    if (th.dataset.sort) th.setAttribute("aria-sort", th.dataset.sort === key ? (ascending ? "ascending" : "descending") : "none");
  }
  const body = $("results").tBodies[0];
  body.replaceChildren(...rows.map((result) => {
    const s = score(result);
    const actions = [["Preview join", "json"], ["Parquet", "parquet"], ["CSV", "csv"]].map(([label, format]) =>
      el("button", { type: "button", className: `join-${format}`, "aria-label": `${label} of ${result.table} (rank ${result.rank})`, text: label, onclick: () => joinResult(result, format) }));
    return el("tr", { className: "result", "data-rank": result.rank },
      el("td", { className: "num", text: String(result.rank) }),
      tableCell(result),
      columnCell(result),
      el("td", { className: "score", title: s.title }, el("div", { className: "score-text", text: s.text }),
        el("div", { className: "bar", role: "img", "aria-label": `score ${percent(s.share)}` }, el("span", { style: `width: ${Math.max(0, Math.min(1, s.share)) * 100}%` }))),
      el("td", { className: "evidence" }, evidence(result)),
      el("td", { className: "join-actions" }, actions));
  }));
}

function sortBy(key) {
  const ascending = state.sort.key === key ? !state.sort.ascending : key !== "score";  // best score first
  state.sort = { key, ascending };
  renderResults();
}

// --- join ----------------------------------------------------------------------------------

async function joinResult(result, format) {
  const joinParams = readParams($("join-form"), state.forms.join);
  if (joinParams === null) return;
  const options = request({ rank: result.rank, format, snapshot_id: state.search.snapshot_id, ...joinParams });
  if (!options) return;
  setStatus("join-status", "");
  $("join-section").hidden = false;
  try {
    const response = await withProgress(format === "json" ? "Joining…" : `Preparing the ${format} file…`, () => api("api/join", options));
    if (format !== "json") {
      const link = el("a", { href: URL.createObjectURL(await response.blob()) });
      link.download = (response.headers.get("Content-Disposition") || "").split('filename="')[1]?.replace('"', "") || `joined.${format}`;
      link.click();
      setStatus("join-status", `Downloaded ${link.download}`);
      return;
    }
    showPreview(result, await response.json());
  } catch (error) {
    setStatus("join-status", `Join failed: ${error.message}`, true);
  }
}

function showPreview(result, data) {
  const provenance = data.provenance;
  const before = provenance.rows_in, after = provenance.rows_out, matched = provenance.query_rows_matched;
  const queryColumns = state.columns.length;
  const added = data.columns.slice(queryColumns);
  const legend = el("div", { className: "help" }, el("span", { className: "badge added", text: "+" }), ` columns (green) are added from ${result.table}; the others are yours.`);
  $("preview-info").replaceChildren(
    el("div", { className: "counts" }, "Rows: ", el("strong", { id: "rows-before", text: count(before) }), " before → ", el("strong", { id: "rows-after", text: count(after) }), " after · ",
      el("strong", { id: "match-rate", text: `${count(matched)} of ${count(before)} rows matched (${percent(before ? matched / before : 0)})` }), ` · ${added.length} columns added`),
    el("div", { className: "help", text: `Joined ${result.table} (rank ${result.rank}, ${data.method}, snapshot ${data.snapshot_id}) on ${provenance.keys.map((k) => `${k.query_column} = ${k.found_column}`).join(", ")}, ${provenance.how} join, policy ${provenance.policy}${provenance.transform ? `, transformation ${JSON.stringify(provenance.transform)}` : ""}; showing ${data.preview.length} of ${count(after)} rows.` }), legend);
  const isAdded = (i) => i >= queryColumns;
  const head = $("preview").tHead;
  head.replaceChildren(el("tr", {}, data.columns.map((name, i) => el("th", { scope: "col", className: isAdded(i) ? "added" : null, "data-column": name, title: isAdded(i) ? `added by the join from ${result.table}` : null },
    isAdded(i) ? el("span", { className: "badge added", "aria-label": "added", text: "+" }) : null, isAdded(i) ? " " : null, name))));
  $("preview").tBodies[0].replaceChildren(...data.preview.map((record) =>
    el("tr", { className: "preview-row" }, data.columns.map((name, i) => el("td", { className: isAdded(i) ? "added" : null, text: record[name] === null ? "" : String(record[name]) })))));
  $("preview").hidden = false;
  $("preview-info").scrollIntoView({ block: "nearest" });
}

// --- wiring --------------------------------------------------------------------------------

$("table-search").addEventListener("input", onTableInput);
$("table-search").addEventListener("focus", () => { if ($("table-list").hidden) loadTables(); });
$("table-search").addEventListener("keydown", onTableKey);
$("table-search").addEventListener("blur", () => setTimeout(closeTableList, 100));
$("source-lake").addEventListener("change", useSource);
$("source-upload").addEventListener("change", useSource);
$("file").addEventListener("change", uploadColumns);
$("method").addEventListener("change", showMethodForm);
$("search").addEventListener("click", search);
for (const th of $("results").tHead.rows[0].cells) {
  if (th.dataset.sort) th.querySelector("button").addEventListener("click", () => sortBy(th.dataset.sort));
}
watchLake();
loadForms().catch((error) => setStatus("status", `Could not load the methods: ${error.message}`, true));
