/* global document, window, fetch, sessionStorage, localStorage, AbortController, FileReader, setTimeout, clearTimeout, setInterval, URLSearchParams */
// toolrouter web console: plain ES module, no build step. Everything shown comes from the REST API.

const KEY_STORAGE = 'toolrouter.apiKey';
const SEARCH_DEBOUNCE_MS = 200;
const ACTIVITY_POLL_MS = 3_000;
const SVG_NS = 'http://www.w3.org/2000/svg';

const $ = (selector) => document.querySelector(selector);

// --- API access --------------------------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

function apiKey() {
  return $('#api-key').value.trim();
}

async function api(method, path, body, signal) {
  const headers = {};
  if (body !== undefined) headers['content-type'] = 'application/json';
  const key = apiKey();
  if (key) headers.authorization = `Bearer ${key}`;
  const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal });
  const text = await response.text();
  let parsed;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  if (!response.ok) {
    const code = parsed?.error?.code ?? `http_${response.status}`;
    const message = parsed?.error?.message ?? (text.slice(0, 200) || response.statusText);
    throw new ApiError(response.status, code, message);
  }
  return parsed;
}

/** Words for an error a person can act on; 401/403 say what key is needed. */
function describe(error) {
  if (error instanceof ApiError) {
    if (error.status === 401) return `401 Unauthorized (${error.code}): ${error.message} — enter a valid API key at the top of the page.`;
    if (error.status === 403) return `403 Forbidden (${error.code}): ${error.message} — this key may not do this; evaluation and apply need the admin key.`;
    return `${error.status} ${error.code}: ${error.message}`;
  }
  return `request failed: ${error instanceof Error ? error.message : String(error)}`;
}

function showError(area, error) {
  const box = document.querySelector(`[data-error="${area}"]`);
  if (error === undefined) {
    box.hidden = true;
    box.textContent = '';
    box.removeAttribute('data-status');
    return;
  }
  box.textContent = describe(error);
  box.dataset.status = error instanceof ApiError ? String(error.status) : 'network';
  box.hidden = false;
  if (error instanceof ApiError && (error.status === 401 || error.status === 403)) showBanner(describe(error));
}

function showBanner(text) {
  const banner = $('#banner');
  banner.textContent = text;
  banner.hidden = !text;
}

// --- key ---------------------------------------------------------------------------------------------------------

function loadKey() {
  const remembered = localStorage.getItem(KEY_STORAGE);
  $('#api-key').value = remembered ?? sessionStorage.getItem(KEY_STORAGE) ?? '';
  $('#remember-key').checked = remembered !== null;
}

function storeKey() {
  const key = apiKey();
  // Session storage by default: the key is gone when the tab closes unless the operator asks otherwise.
  localStorage.removeItem(KEY_STORAGE);
  sessionStorage.removeItem(KEY_STORAGE);
  if (key) ($('#remember-key').checked ? localStorage : sessionStorage).setItem(KEY_STORAGE, key);
}

// --- helpers -----------------------------------------------------------------------------------------------------

function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === 'class') node.className = value;
    else if (name === 'text') node.textContent = value;
    else if (name.startsWith('data-')) node.setAttribute(name, value);
    else if (name in node) node[name] = value;
    else node.setAttribute(name, value);
  }
  for (const child of children) if (child !== undefined && child !== null) node.append(child);
  return node;
}

function svg(tag, attributes = {}, text) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, String(value));
  if (text !== undefined) node.textContent = text;
  return node;
}

const pct = (value) => `${(value * 100).toFixed(1)}%`;
const fixed = (value, digits = 3) => value.toFixed(digits);
const round = (value) => Math.round(value * 1000) / 1000;

// --- catalog view ------------------------------------------------------------------------------------------------

async function loadCatalog() {
  showError('catalog');
  try {
    const [catalog, status, servers] = await Promise.all([
      api('GET', '/v1/catalog'),
      api('GET', '/v1/index/status'),
      // The MCP face may be absent or the key may not see it; the rest of the view still works.
      api('GET', '/v1/mcp/servers').catch((error) => ({ error })),
    ]);
    renderCatalog(catalog, status, servers);
  } catch (error) {
    showError('catalog', error);
  }
}

function renderCatalog(catalog, status, servers) {
  $('[data-testid="tool-count"]').textContent = String(catalog.tools.length);
  $('[data-testid="catalog-hash"]').textContent = catalog.catalogHash;
  $('[data-testid="catalog-hash"]').title = catalog.catalogHash;
  $('[data-testid="index-hash"]').textContent = status.indexedHash ?? 'none yet';
  $('[data-testid="index-hash"]').title = status.indexedHash ?? '';
  const state = $('[data-testid="index-state"]');
  const current = status.indexedHash !== null && status.indexedHash === catalog.catalogHash;
  state.textContent = status.state + (status.state === 'ready' && !current ? ' (catalog changed since)' : '');
  state.className = `badge state-${status.state}`;
  $('[data-testid="index-model"]').textContent = status.model ?? '—';
  $('[data-testid="index-built"]').textContent = status.builtAt ? new Date(status.builtAt).toLocaleString() : '—';
  const indexError = $('[data-testid="index-error"]');
  indexError.hidden = !status.lastError;
  indexError.textContent = status.lastError ? `last build error: ${status.lastError}` : '';

  const counts = new Map(catalog.sources.map((source) => [source, 0]));
  for (const entry of catalog.tools) counts.set(entry.source, (counts.get(entry.source) ?? 0) + 1);
  const sourceRows = [...counts].map(([source, tools]) => el('tr', {}, el('td', { text: source }), el('td', { class: 'num', text: String(tools) })));
  $('[data-testid="sources"] tbody').replaceChildren(...(sourceRows.length ? sourceRows : [el('tr', {}, el('td', { colSpan: 2, class: 'muted', text: 'no sources' }))]));

  renderServers(servers);
}

// --- servers -----------------------------------------------------------------------------------------------------

async function loadServers() {
  showError('servers');
  renderServers(await api('GET', '/v1/mcp/servers').catch((error) => ({ error })));
}

function renderServers(servers) {
  const upstreamBody = $('[data-testid="upstreams"] tbody');
  if (servers.error) {
    upstreamBody.replaceChildren(el('tr', {}, el('td', { colSpan: 8, class: 'muted', text: describe(servers.error) })));
    return;
  }
  if (servers.servers.length === 0) {
    upstreamBody.replaceChildren(el('tr', {}, el('td', { colSpan: 8, class: 'muted', text: 'none configured (mcp.servers, --mcp-config, or add one below)' })));
    return;
  }
  renderLeftOut(servers.leftOut ?? []);
  upstreamBody.replaceChildren(
    ...servers.servers.map((server) => {
      const actions = el('td', { class: 'actions' });
      // OAuth servers are connected once by the admin: the authorization server's page opens in a new window.
      if (server.auth === 'oauth') actions.append(connectButton(server));
      actions.append(serverButton('reconnect', server.name, () => api('POST', `/v1/mcp/servers/${encodeURIComponent(server.name)}/reconnect`)));
      // Only servers added here can be removed here; the others come from files.
      if (server.origin === 'runtime') actions.append(serverButton('remove', server.name, () => api('DELETE', `/v1/mcp/servers/${encodeURIComponent(server.name)}`)));
      return el(
        'tr',
        { 'data-server': server.name },
        el('td', { class: 'name', 'data-label': 'server', text: server.name }),
        el('td', { class: 'nowrap', 'data-label': 'transport', text: server.transport }),
        el('td', { 'data-label': 'state' }, el('span', { class: `badge state-${server.state}`, text: server.state })),
        el('td', { class: 'num', 'data-label': 'tools', text: String(server.tools) }),
        el('td', { class: 'error-text', 'data-label': 'last error', text: server.authorization ? `needs authorization (${server.authorization.reason}): ${server.authorization.message}` : withoutRepeats(server.lastError ?? '') }),
        el('td', { class: 'nowrap', 'data-label': 'revision', text: server.revision ?? '' }),
        el('td', { class: 'nowrap', 'data-label': 'from', text: server.origin ?? '' }),
        actions,
      );
    }),
  );
}

/** Imported entries the service left out (bad type, unset variable, bad URL...), each with its reason. */
function renderLeftOut(entries) {
  const list = $('[data-testid="left-out"]');
  list.hidden = entries.length === 0;
  list.replaceChildren(
    ...entries.map((entry) =>
      el('li', { 'data-server': entry.name }, el('strong', { text: entry.name }), el('span', { class: 'muted', text: ` (${entry.file}): ` }), el('span', { class: 'error-text', text: entry.reason })),
    ),
  );
}

/**
 * Error chains repeat themselves when each layer adds its cause's message ("fetch failed: fetch failed"): a part equal
 * to the one before it is shown once.
 */
function withoutRepeats(text) {
  return text
    .split(': ')
    .filter((part, i, parts) => i === 0 || part !== parts[i - 1])
    .join(': ');
}

/**
 * Connect: POST .../authorize answers the authorization URL; the window is opened inside the click (so popup blockers
 * allow it) and sent there once the URL is known. The browser comes back to /oauth/callback; the list is refreshed
 * until the server is connected (or a minute passes).
 */
function connectButton(server) {
  const button = el('button', { type: 'button', class: 'small', text: 'connect', 'data-action': 'connect' });
  button.addEventListener('click', async () => {
    button.disabled = true;
    showError('servers');
    const popup = window.open('', '_blank');
    try {
      const { authorization_url: url } = await api('POST', `/v1/mcp/servers/${encodeURIComponent(server.name)}/authorize`);
      if (popup) popup.location.href = url;
      else window.location.href = url;
      $('[data-testid="servers-status"]').textContent = `connect: ${server.name}: finish in the window that opened`;
      for (let i = 0; i < 40; i++) {
        await new Promise((resolve) => setTimeout(resolve, 1500));
        const now = await api('GET', '/v1/mcp/servers').catch(() => undefined);
        if (now?.servers?.find((entry) => entry.name === server.name)?.state === 'connected') break;
      }
    } catch (error) {
      popup?.close();
      showError('servers', error);
    }
    await loadServers();
  });
  return button;
}

function serverButton(label, name, action) {
  const button = el('button', { type: 'button', class: 'small', text: label, 'data-action': label });
  button.addEventListener('click', async () => {
    button.disabled = true;
    showError('servers');
    try {
      await action();
      $('[data-testid="servers-status"]').textContent = `${label}: ${name}`;
    } catch (error) {
      showError('servers', error);
    }
    await loadServers();
  });
  return button;
}

async function addServer(event) {
  event.preventDefault();
  const name = $('#server-name').value.trim();
  const header = $('#server-header').value.trim();
  const body = { type: 'http', url: $('#server-url').value.trim(), ...(header ? { headers: { [header]: $('#server-header-value').value } } : {}) };
  const button = $('#add-server-button');
  button.disabled = true;
  showError('servers');
  try {
    await api('PUT', `/v1/mcp/servers/${encodeURIComponent(name)}`, body);
    $('[data-testid="servers-status"]').textContent = `added ${name}; connecting`;
    $('#server-header-value').value = '';
  } catch (error) {
    showError('servers', error);
  } finally {
    button.disabled = false;
  }
  await loadServers();
}

// --- playground --------------------------------------------------------------------------------------------------

let serverDefaults;
let searchTimer;
let searchController;
let searchSequence = 0;

function playgroundSettings() {
  return {
    weights: { bm25: Number($('#bm25-weight').value), vector: Number($('#vector-weight').value) },
    fusion: document.querySelector('input[name="fusion"]:checked').value,
    topK: Math.max(1, Math.min(50, Number($('#top-k').value) || 10)),
  };
}

function setPlayground(weights, fusion) {
  $('#bm25-weight').value = String(weights.bm25);
  $('#vector-weight').value = String(weights.vector);
  for (const radio of document.querySelectorAll('input[name="fusion"]')) radio.checked = radio.value === fusion;
  showWeights();
}

function showWeights() {
  $('#bm25-value').textContent = fixed(Number($('#bm25-weight').value), 2);
  $('#vector-value').textContent = fixed(Number($('#vector-weight').value), 2);
}

async function loadSettings() {
  try {
    serverDefaults = await api('GET', '/v1/search/settings');
    const note = `server defaults: ${serverDefaults.fusion}, bm25 ${serverDefaults.weights.bm25} / vector ${serverDefaults.weights.vector}` +
      (serverDefaults.source === 'applied' ? ` (applied ${new Date(serverDefaults.appliedAt).toLocaleString()})` : ' (from config)');
    $('[data-testid="defaults-note"]').textContent = note;
    return serverDefaults;
  } catch (error) {
    // Without the settings route (or the key for it) the playground still works with its own starting values.
    $('[data-testid="defaults-note"]').textContent = `server defaults unknown: ${describe(error)}`;
    return undefined;
  }
}

function scheduleSearch() {
  showWeights();
  clearTimeout(searchTimer);
  searchTimer = setTimeout(runSearch, SEARCH_DEBOUNCE_MS);
}

async function runSearch() {
  const query = $('#query').value.trim();
  const status = $('[data-testid="search-status"]');
  const list = $('#results');
  searchController?.abort();
  if (!query) {
    list.replaceChildren();
    list.dataset.query = '';
    status.textContent = 'type a query';
    showError('search');
    return;
  }
  const settings = playgroundSettings();
  if (settings.weights.bm25 + settings.weights.vector <= 0) {
    status.textContent = 'set at least one weight above 0';
    return;
  }
  const sequence = ++searchSequence;
  searchController = new AbortController();
  status.textContent = 'searching…';
  try {
    const started = window.performance.now();
    const response = await api(
      'POST',
      '/v1/tools/search',
      { query, mode: 'hybrid', top_k: settings.topK, weights: settings.weights, fusion: settings.fusion },
      searchController.signal,
    );
    // A slower answer to an older request must not overwrite a newer one.
    if (sequence !== searchSequence) return;
    showError('search');
    renderResults(response.results, settings);
    list.dataset.query = query;
    list.dataset.settings = JSON.stringify({ weights: settings.weights, fusion: settings.fusion });
    status.textContent = `${response.results.length} result${response.results.length === 1 ? '' : 's'} in ${Math.round(window.performance.now() - started)} ms · ${settings.fusion}, bm25 ${settings.weights.bm25} / vector ${settings.weights.vector}`;
  } catch (error) {
    if (error?.name === 'AbortError' || sequence !== searchSequence) return;
    status.textContent = '';
    showError('search', error);
  }
}

function renderResults(results, settings) {
  const maxBm25 = Math.max(0, ...results.map((hit) => hit.scores?.bm25 ?? 0));
  const maxFused = Math.max(0, ...results.map((hit) => hit.score));
  const items = results.map((hit, rank) => {
    const { score, scores = {}, ...tool } = hit;
    const fusedShare = settings.fusion === 'weighted' ? score : maxFused > 0 ? score / maxFused : 0;
    const bars = el(
      'div',
      { class: 'bars' },
      bar('fused', score, fusedShare, fixed(score, settings.fusion === 'rrf' ? 4 : 3)),
      bar('bm25', scores.bm25, scores.bm25 === undefined || maxBm25 <= 0 ? 0 : scores.bm25 / maxBm25, scores.bm25 === undefined ? '—' : fixed(scores.bm25, 2)),
      bar('vector', scores.vector, Math.max(0, scores.vector ?? 0), scores.vector === undefined ? '—' : fixed(scores.vector, 3)),
    );
    const details = el(
      'details',
      { class: 'definition' },
      el('summary', { text: 'definition' }),
      el('pre', { 'data-testid': 'definition', text: JSON.stringify(tool, null, 2) }),
    );
    return el(
      'li',
      { 'data-name': tool.name, 'data-testid': 'result' },
      el('div', { class: 'result-head' }, el('span', { class: 'rank', text: String(rank + 1) }), el('code', { class: 'name', text: tool.name }), tool.title ? el('span', { class: 'title', text: tool.title }) : null),
      el('p', { class: 'description', text: tool.description ?? '' }),
      bars,
      details,
    );
  });
  $('#results').replaceChildren(...items);
}

function bar(label, value, share, text) {
  const width = `${Math.round(Math.min(1, Math.max(0, share)) * 1000) / 10}%`;
  const fill = el('span', { class: `fill fill-${label}` });
  fill.style.width = width;
  return el(
    'div',
    { class: 'bar', 'data-signal': label, title: value === undefined ? `${label}: not a candidate of this signal` : `${label}: ${value}` },
    el('span', { class: 'bar-label', text: label }),
    el('span', { class: 'track' }, fill),
    el('span', { class: 'bar-value', text }),
  );
}

// --- activity ----------------------------------------------------------------------------------------------------

/** Search ids already shown, so the ones that arrived since the last poll can be marked. */
let seenSearches;
let activityRunning = false;

async function loadActivity() {
  if (activityRunning) return;
  activityRunning = true;
  try {
    const [log, summary] = await Promise.all([api('GET', '/v1/analytics/searches?limit=50'), api('GET', '/v1/analytics/summary')]);
    showError('activity');
    renderActivity(log.searches, summary);
  } catch (error) {
    showError('activity', error);
  } finally {
    activityRunning = false;
  }
}

function renderActivity(searches, summary) {
  for (const name of ['searches', 'answered', 'unanswered', 'abstained']) {
    const waiting = name === 'unanswered' && summary.waiting ? ` (${summary.waiting} within the window)` : '';
    $(`[data-count="${name}"]`).textContent = `${summary[name]}${waiting}`;
  }
  const before = seenSearches;
  seenSearches = new Set(searches.map((search) => search.id));
  const query = (search) => (search.query === '' ? el('i', { text: 'not kept' }) : search.query);
  $('[data-testid="activity-searches"] tbody').replaceChildren(
    ...searches.map((search) =>
      el(
        'tr',
        { 'data-search': search.id, class: [before && !before.has(search.id) ? 'fresh' : '', search.abstained ? 'abstained' : ''].join(' ').trim() },
        el('td', { class: 'nowrap', 'data-label': 'time', text: new Date(search.time).toLocaleTimeString() }),
        el('td', { class: 'nowrap', 'data-label': 'surface', text: search.key ? `${search.surface} · ${search.key}` : search.surface }),
        el('td', { class: 'query', 'data-label': 'query' }, query(search)),
        el('td', { class: 'found', 'data-label': 'found', text: search.abstained ? 'nothing' : search.results.slice(0, 3).map((result) => `${result.name} ${fixed(result.score, 2)}`).join(', ') }),
        el('td', { 'data-label': 'called', 'data-called': search.called ?? '', text: search.called ?? '—' }),
        el('td', { class: 'num', 'data-label': 'ms', text: fixed(search.ms, 1) }),
      ),
    ),
  );
  const rows = (items, first, second) => items.map((item) => el('tr', {}, el('td', {}, first(item)), el('td', { class: 'num', text: String(second(item)) })));
  $('[data-testid="activity-misses"] tbody').replaceChildren(...rows(summary.misses, (miss) => miss.query, (miss) => miss.count));
  $('[data-testid="activity-top-tools"] tbody').replaceChildren(...rows(summary.top_tools, (tool) => tool.name, (tool) => tool.count));
  const more = summary.unused_count > summary.unused_tools.length ? [el('li', { class: 'muted', text: `… ${summary.unused_count - summary.unused_tools.length} more` })] : [];
  $('[data-testid="activity-unused"]').replaceChildren(...summary.unused_tools.map((name) => el('li', { text: name })), ...more);
}

function pollActivity() {
  if ($('#activity-live').checked && document.visibilityState !== 'hidden') void loadActivity();
}

// --- audit -------------------------------------------------------------------------------------------------------

/** Where the next (older) page of audit records starts, for "Older". */
let auditNext;

async function loadAudit(more = false) {
  const params = new URLSearchParams({ limit: '50' });
  for (const [name, input] of [['caller', '#audit-caller'], ['tool', '#audit-tool'], ['decision', '#audit-decision']]) {
    const value = $(input).value.trim();
    if (value) params.set(name, value);
  }
  if (more && auditNext) params.set('cursor', auditNext);
  try {
    const page = await api('GET', `/v1/audit?${params}`);
    showError('audit');
    renderAudit(page.records, more);
    auditNext = page.next;
    $('#audit-more').hidden = auditNext === undefined;
  } catch (error) {
    showError('audit', error);
    if (!more) $('[data-testid="audit-records"] tbody').replaceChildren();
    $('#audit-more').hidden = true;
  }
}

/** Decisions a person should see at a glance: refusals, and calls a person was asked about. */
const AUDIT_MARKS = { deny: 'refused', blocked: 'refused', declined: 'refused', confirmed: 'confirmed' };

function renderAudit(records, more) {
  const rows = records.map((record) =>
    el(
      'tr',
      { 'data-record': record.id, 'data-decision': record.decision, class: AUDIT_MARKS[record.decision] ?? '' },
      el('td', { class: 'nowrap', 'data-label': 'time', text: new Date(record.time).toLocaleTimeString() }),
      el('td', { 'data-label': 'surface', text: record.surface }),
      el('td', { class: 'nowrap', 'data-label': 'caller', text: record.caller.groups.length ? `${record.caller.id} (${record.caller.groups.join(', ')})` : record.caller.id }),
      el('td', { class: 'query', 'data-label': 'tool', text: record.tool }),
      el('td', { class: 'decision', 'data-label': 'decision', text: record.decision }),
      el('td', { 'data-label': 'policies', text: record.policies.join(', ') || '—' }),
      el('td', { 'data-label': 'outcome', text: record.error ? `${record.outcome}: ${record.error}` : record.outcome }),
      el('td', { class: 'num', 'data-label': 'ms', text: fixed(record.ms, 0) }),
    ),
  );
  const body = $('[data-testid="audit-records"] tbody');
  if (more) body.append(...rows);
  else body.replaceChildren(...rows);
}

// --- tuning ------------------------------------------------------------------------------------------------------

/** Parses the JSONL text; returns the queries and, for each, the line it came from (for error messages). */
function parseQueries(text) {
  const queries = [];
  const lines = [];
  text.split(/\r?\n/).forEach((line, index) => {
    if (line.trim() === '') return;
    let value;
    try {
      value = JSON.parse(line);
    } catch (error) {
      throw new Error(`line ${index + 1}: invalid JSON (${error.message})`, { cause: error });
    }
    queries.push(value);
    lines.push(index + 1);
  });
  if (queries.length === 0) throw new Error('no queries: paste JSONL or choose a file');
  return { queries, lines };
}

async function runEvaluation() {
  showError('tuning');
  const status = $('[data-testid="eval-status"]');
  let parsed;
  try {
    parsed = parseQueries($('#queries-text').value);
  } catch (error) {
    showError('tuning', error);
    return;
  }
  const steps = Number($('#grid-steps').value);
  const button = $('#run-eval');
  button.disabled = true;
  status.textContent = `evaluating ${parsed.queries.length} queries over ${2 * (steps + 1)} settings…`;
  try {
    const result = await api('POST', '/v1/eval', { queries: parsed.queries, grid: { steps } });
    status.textContent = '';
    renderEvaluation(result, parsed.lines);
  } catch (error) {
    status.textContent = '';
    // The API names queries by array index; the person knows them by line.
    if (error instanceof ApiError) error.message = error.message.replace(/queries\.(\d+)/g, (_, i) => `line ${parsed.lines[Number(i)] ?? Number(i) + 1}`);
    showError('tuning', error);
  } finally {
    button.disabled = false;
  }
}

async function runTrafficEvaluation() {
  showError('tuning');
  const status = $('[data-testid="eval-status"]');
  const steps = Number($('#grid-steps').value);
  const button = $('#run-traffic-eval');
  button.disabled = true;
  status.textContent = 'evaluating on traffic (answered searches, labelled by the tool then called)…';
  try {
    const result = await api('POST', '/v1/eval', { from: 'traffic', grid: { steps } });
    const { source } = result;
    status.textContent = `traffic: ${source.labels} labels, from ${new Date(source.first).toLocaleString()} to ${new Date(source.last).toLocaleString()}`;
    renderEvaluation(result, []);
  } catch (error) {
    status.textContent = '';
    showError('tuning', error);
  } finally {
    button.disabled = false;
  }
}

function renderEvaluation(result, lines) {
  $('#eval-results').hidden = false;
  const { best, current } = result;
  const skipped = result.skipped.length
    ? ` ${result.skipped.length} skipped (no expected tool in the live catalog): lines ${result.skipped.map((s) => lines[s.line - 1] ?? s.line).join(', ')}.`
    : '';
  $('[data-testid="eval-summary"]').replaceChildren(
    el('p', { text: `${result.queries} queries on ${result.catalog.tools} tools (index ${result.index.hash.slice(0, 12)}…, ${result.index.model}).${skipped}` }),
    el(
      'p',
      { 'data-testid': 'eval-best' },
      el('b', { text: 'best (by MRR): ' }),
      `${best.fusion}, bm25 ${best.weights.bm25} / vector ${best.weights.vector} — Recall@1 ${pct(best.recallAt1)}, Recall@5 ${pct(best.recallAt5)}, MRR ${fixed(best.mrr)} `,
      el('button', { type: 'button', 'data-testid': 'apply-best', text: 'apply best', onclick: () => applySettings(best) }),
    ),
    el(
      'p',
      { 'data-testid': 'eval-current' },
      el('b', { text: 'current defaults: ' }),
      `${current.fusion}, bm25 ${current.weights.bm25} / vector ${current.weights.vector} — Recall@1 ${pct(current.recallAt1)}, Recall@5 ${pct(current.recallAt5)}, MRR ${fixed(current.mrr)}`,
    ),
  );
  if (result.min_scores) {
    $('[data-testid="eval-summary"]').append(
      el('p', { 'data-testid': 'eval-min-scores' }, el('b', { text: 'min_score (current weights): ' }), result.min_scores.map((cut) => `${cut.min_score} → Recall@5 ${pct(cut.recallAt5)}`).join(' · ')),
    );
  }
  const charts = ['weighted', 'rrf'].map((fusion) => chart(fusion, result.rows.filter((row) => row.fusion === fusion), best, current));
  $('[data-testid="eval-charts"]').replaceChildren(...charts, legend());
  $('[data-testid="eval-table"] tbody').replaceChildren(
    ...result.rows.map((row) =>
      el(
        'tr',
        { class: row === best || sameSetting(row, best) ? 'best' : '', 'data-fusion': row.fusion, 'data-bm25': String(row.weights.bm25) },
        el('td', { text: row.fusion }),
        el('td', { class: 'num', text: String(row.weights.bm25) }),
        el('td', { class: 'num', text: String(row.weights.vector) }),
        el('td', { class: 'num', 'data-metric': 'recallAt1', text: pct(row.recallAt1) }),
        el('td', { class: 'num', 'data-metric': 'recallAt5', text: pct(row.recallAt5) }),
        el('td', { class: 'num', 'data-metric': 'mrr', text: fixed(row.mrr) }),
        el('td', {}, el('button', { type: 'button', class: 'small', text: 'apply', onclick: () => applySettings(row) })),
      ),
    ),
  );
}

const sameSetting = (a, b) => a.fusion === b.fusion && a.weights.bm25 === b.weights.bm25 && a.weights.vector === b.weights.vector;

const SERIES = [
  { key: 'recallAt1', label: 'Recall@1', className: 'r1' },
  { key: 'recallAt5', label: 'Recall@5', className: 'r5' },
  { key: 'mrr', label: 'MRR', className: 'mrr' },
];

/** A line chart of the three metrics against the BM25 share of the weight, for one fusion method. */
function chart(fusion, rows, best, current) {
  const width = 420;
  const height = 240;
  const pad = { left: 40, right: 12, top: 24, bottom: 36 };
  const x = (share) => pad.left + share * (width - pad.left - pad.right);
  const y = (value) => height - pad.bottom - value * (height - pad.top - pad.bottom);
  const root = svg('svg', { viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': `${fusion} fusion: metrics by BM25 weight`, 'data-fusion': fusion, class: 'chart' });
  root.append(svg('text', { x: pad.left, y: 15, class: 'chart-title' }, `${fusion === 'rrf' ? 'RRF' : 'weighted'} fusion`));
  for (const tick of [0, 0.25, 0.5, 0.75, 1]) {
    root.append(svg('line', { x1: pad.left, x2: width - pad.right, y1: y(tick), y2: y(tick), class: 'grid' }));
    root.append(svg('text', { x: pad.left - 6, y: y(tick) + 4, class: 'axis', 'text-anchor': 'end' }, tick.toFixed(2)));
    root.append(svg('text', { x: x(tick), y: height - pad.bottom + 14, class: 'axis', 'text-anchor': 'middle' }, String(tick)));
  }
  root.append(svg('text', { x: (pad.left + width - pad.right) / 2, y: height - 6, class: 'axis', 'text-anchor': 'middle' }, 'BM25 weight (vector = 1 − BM25)'));
  const share = (row) => row.weights.bm25 / (row.weights.bm25 + row.weights.vector);
  if (current.fusion === fusion) {
    const at = x(share(current));
    root.append(svg('line', { x1: at, x2: at, y1: pad.top, y2: height - pad.bottom, class: 'current' }));
    root.append(svg('text', { x: at + 3, y: pad.top + 10, class: 'axis' }, 'current'));
  }
  const sorted = [...rows].sort((a, b) => share(a) - share(b));
  for (const series of SERIES) {
    const points = sorted.map((row) => `${round(x(share(row)))},${round(y(row[series.key]))}`).join(' ');
    root.append(svg('polyline', { points, class: `series ${series.className}` }));
    for (const row of sorted) {
      const dot = svg('circle', { cx: round(x(share(row))), cy: round(y(row[series.key])), r: 2.5, class: `dot ${series.className}` });
      dot.append(svg('title', {}, `${series.label} ${series.key === 'mrr' ? fixed(row[series.key]) : pct(row[series.key])} at bm25 ${row.weights.bm25} / vector ${row.weights.vector}`));
      root.append(dot);
    }
  }
  const top = rows.find((row) => sameSetting(row, best));
  if (top) {
    root.append(svg('circle', { cx: round(x(share(top))), cy: round(y(top.mrr)), r: 6, class: 'best-marker' }));
    root.append(svg('text', { x: round(x(share(top))), y: round(y(top.mrr)) - 10, class: 'best-label', 'text-anchor': 'middle' }, 'best'));
  }
  return root;
}

function legend() {
  return el(
    'p',
    { class: 'legend' },
    ...SERIES.map((series) => el('span', { class: `key ${series.className}`, text: series.label })),
    el('span', { class: 'key current', text: 'current default' }),
  );
}

async function applySettings(row) {
  const status = $('[data-testid="settings-status"]');
  showError('tuning');
  try {
    const applied = await api('PUT', '/v1/search/settings', { weights: { bm25: row.weights.bm25, vector: row.weights.vector }, fusion: row.fusion });
    await loadSettings();
    setPlayground(applied.weights, applied.fusion);
    scheduleSearch();
    // Said last, so whoever waits for "applied" finds the playground already on the new defaults.
    status.textContent = `applied: ${applied.fusion}, bm25 ${applied.weights.bm25} / vector ${applied.weights.vector} (${applied.scope === 'cluster' ? 'every instance, through Redis' : 'this instance only, until it restarts'})`;
  } catch (error) {
    showError('tuning', error);
  }
}

async function resetSettings() {
  const status = $('[data-testid="settings-status"]');
  showError('tuning');
  try {
    const reset = await api('DELETE', '/v1/search/settings');
    await loadSettings();
    setPlayground(reset.weights, reset.fusion);
    scheduleSearch();
    status.textContent = `defaults back to config: ${reset.fusion}, bm25 ${reset.weights.bm25} / vector ${reset.weights.vector}`;
  } catch (error) {
    showError('tuning', error);
  }
}

function readFile(input) {
  const file = input.files?.[0];
  if (!file) return;
  const reader = new FileReader();
  reader.onload = () => {
    $('#queries-text').value = String(reader.result);
  };
  reader.onerror = () => showError('tuning', new Error(`could not read ${file.name}`));
  reader.readAsText(file);
}

// --- start -------------------------------------------------------------------------------------------------------

async function refreshAll() {
  showBanner('');
  const defaults = await loadSettings();
  if (defaults) setPlayground(defaults.weights, defaults.fusion);
  await loadCatalog();
  await runSearch();
  await loadActivity();
  await loadAudit();
}

function start() {
  loadKey();
  $('#api-key').addEventListener('change', () => {
    storeKey();
    void refreshAll();
  });
  $('#remember-key').addEventListener('change', storeKey);
  $('#forget-key').addEventListener('click', () => {
    $('#api-key').value = '';
    storeKey();
    void refreshAll();
  });
  $('#key-form').addEventListener('submit', (event) => event.preventDefault());
  $('#refresh-catalog').addEventListener('click', () => void loadCatalog());
  $('#refresh-servers').addEventListener('click', () => void loadServers());
  $('#add-server').addEventListener('submit', (event) => void addServer(event));
  for (const input of ['#query', '#bm25-weight', '#vector-weight', '#top-k']) $(input).addEventListener('input', scheduleSearch);
  for (const radio of document.querySelectorAll('input[name="fusion"]')) radio.addEventListener('change', scheduleSearch);
  $('#use-defaults').addEventListener('click', async () => {
    const defaults = await loadSettings();
    if (defaults) setPlayground(defaults.weights, defaults.fusion);
    scheduleSearch();
  });
  $('#queries-file').addEventListener('change', (event) => readFile(event.target));
  $('#run-eval').addEventListener('click', () => void runEvaluation());
  $('#run-traffic-eval').addEventListener('click', () => void runTrafficEvaluation());
  $('#activity-live').addEventListener('change', pollActivity);
  $('#audit-filters').addEventListener('submit', (event) => {
    event.preventDefault();
    void loadAudit();
  });
  $('#audit-more').addEventListener('click', () => void loadAudit(true));
  // Searches as they arrive: polled while the box is ticked and the page is in view.
  setInterval(pollActivity, ACTIVITY_POLL_MS);
  $('#reset-settings').addEventListener('click', () => void resetSettings());
  void refreshAll();
}

start();
