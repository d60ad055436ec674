// The dashboard's pages: one script that draws the page its path names from the JSON
// API (/api/v1/...) and keeps it current from the server-sent event stream. Text goes
// in with textContent only: descriptions and engine names come from users.
"use strict";

(() => {
  // ---- Small helpers ----------------------------------------------------------------

  /** An element with attributes and children (strings become text nodes). */
  function el(tag, attributes, ...children) {
    const node = tag.startsWith("svg:")
      ? document.createElementNS("http://www.w3.org/2000/svg", tag.slice(4))
      : document.createElement(tag);
    for (const [name, value] of Object.entries(attributes || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
      else node.setAttribute(name, value === true ? "" : String(value));
    }
    for (const child of children.flat(Infinity)) {
      if (child === undefined || child === null || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  const main = document.getElementById("main");
  const liveStatus = document.getElementById("live");

  function fixed(value, digits) {
    return Number.isFinite(value) ? value.toFixed(digits) : "–";
  }

  function signed(value, digits) {
    if (!Number.isFinite(value)) return "–";
    const text = value.toFixed(digits);
    return value > 0 ? "+" + text : text.replace("-", "−");
  }

  function games(job) {
    const t = job.totals || {};
    return (t.wins || 0) + (t.draws || 0) + (t.losses || 0);
  }

  function eloText(elo) {
    if (!elo) return "–";
    return `${signed(elo.elo, 1)} [${signed(elo.low, 1)}, ${signed(elo.high, 1)}]`;
  }

  function pentanomial(job) {
    const p = (job.totals && job.totals.pentanomial) || [];
    return p.length === 5 ? p.join(" ") : "–";
  }

  function when(ms) {
    if (!ms) return "–";
    return new Date(ms).toLocaleString();
  }

  /** A length of time, in the coarsest unit that keeps it readable. */
  function span(ms) {
    const seconds = Math.max(0, Math.round(ms / 1000));
    if (seconds < 90) return `${seconds} s`;
    if (seconds < 5400) return `${Math.round(seconds / 60)} min`;
    if (seconds < 172800) return `${Math.round(seconds / 3600)} h`;
    return `${Math.round(seconds / 86400)} days`;
  }

  function ago(ms) {
    if (!ms) return "never";
    return `${span(Date.now() - ms)} ago`;
  }

  function stateText(job) {
    return job.outcome ? `${job.state}: ${job.outcome}` : job.state;
  }

  /** Calls `work` at most once per `interval` ms, the last call winning. */
  function throttled(work, interval) {
    let timer = null;
    let again = false;
    return () => {
      if (timer) {
        again = true;
        return;
      }
      work();
      timer = setTimeout(function tick() {
        timer = null;
        if (again) {
          again = false;
          work();
          timer = setTimeout(tick, interval);
        }
      }, interval);
    };
  }

  /** A table of cards (rows become cards on a phone): its columns' headers and `body`. */
  function cardTable(id, columns, body) {
    return el("table", { id, class: "cards" },
      el("thead", {}, el("tr", {}, columns.map((c) => el("th", { scope: "col" }, c)))), body);
  }

  /** An error said in `where` (a status line), for the screen reader too. */
  function sayError(where, error) {
    where.replaceChildren(el("span", { class: "error", role: "alert" }, error.message));
  }

  // ---- The session ---------------------------------------------------------------------

  // Who is logged in: the server keeps the session in an HttpOnly cookie no script
  // reads, and tells the page the user and the session's CSRF token, which every
  // action sends back in a header.
  let session = null;

  async function loadSession() {
    try {
      session = await api("/api/v1/session");
    } catch {
      session = null;
    }
    showSession();
  }

  function showSession() {
    const area = document.getElementById("session");
    if (session) {
      const who = session.user
        ? el("a", { href: `/users/${encodeURIComponent(session.user)}`, id: "session-user" }, session.user)
        : el("span", { id: "session-user" }, "a client token");
      area.replaceChildren(who, ` (${session.role}) `,
        el("button", { type: "button", id: "log-out", onclick: logOut }, "Log out"));
    } else {
      area.replaceChildren(el("a", { href: "/login", id: "log-in" }, "Log in"), " · ",
        el("a", { href: "/signup" }, "Sign up"));
    }
  }

  async function logOut() {
    try {
      await api("/api/v1/session", { method: "DELETE" });
    } catch {
      // Logged out already, or the token gone: the cookie goes either way.
    }
    session = null;
    showSession();
    route();
  }

  function loginPage() {
    document.title = "Log in · xq cluster";
    const status = el("p", { role: "status", id: "login-status" });
    const name = el("input", { id: "login-name", autocomplete: "username", required: true });
    const password = el("input", { id: "login-password", type: "password", autocomplete: "current-password", required: true });
    const token = el("input", { id: "login-token", type: "password", autocomplete: "off", spellcheck: "false" });
    const submit = (body) => async (event) => {
      event.preventDefault();
      try {
        session = await api("/api/v1/session", { method: "POST", body });
        showSession();
        history.pushState(null, "", session.user ? `/users/${encodeURIComponent(session.user)}` : "/");
        route();
      } catch (error) {
        sayError(status, error);
      }
    };
    main.replaceChildren(el("h1", {}, "Log in"), status,
      el("form", { id: "login-form", class: "account", onsubmit: (e) => submit({ name: name.value, password: password.value })(e) },
        el("label", { for: "login-name" }, "Name"), name,
        el("label", { for: "login-password" }, "Password"), password,
        el("button", { type: "submit" }, "Log in")),
      el("form", { id: "token-login-form", class: "account", onsubmit: (e) => submit({ token: token.value.trim() })(e) },
        el("label", { for: "login-token" }, "Or a client token (an admin's made without a password)"), token,
        el("button", { type: "submit" }, "Use the token")),
      el("p", { class: "note" }, "No account? ", el("a", { href: "/signup" }, "Sign up"), "."));
  }

  function signupPage() {
    document.title = "Sign up · xq cluster";
    const status = el("p", { role: "status", id: "signup-status" });
    const name = el("input", { id: "signup-name", autocomplete: "username", required: true, maxlength: "32" });
    const password = el("input", { id: "signup-password", type: "password", autocomplete: "new-password", required: true, minlength: "10" });
    main.replaceChildren(el("h1", {}, "Sign up"), status,
      el("form", {
        id: "signup-form",
        class: "account",
        onsubmit: async (event) => {
          event.preventDefault();
          try {
            const reply = await api("/api/v1/signup", { method: "POST", body: { name: name.value, password: password.value } });
            status.replaceChildren(reply.state === "pending"
              ? `Signed up as ${name.value}: an admin or an approver accepts you, then you can log in.`
              : el("span", {}, `Signed up as ${name.value}: `, el("a", { href: "/login" }, "log in"), "."));
          } catch (error) {
            sayError(status, error);
          }
        },
      },
      el("label", { for: "signup-name" }, "Name (1 to 32 letters, digits, '.', '_' or '-')"), name,
      el("label", { for: "signup-password" }, "Password (at least 10 characters)"), password,
      el("button", { type: "submit" }, "Sign up")));
  }

  async function userPage(name) {
    document.title = `${name} · xq cluster`;
    const own = session && session.user === name;
    const status = el("p", { role: "status", id: "user-status" });
    const tests = el("tbody");
    const machines = el("tbody");
    const credit = el("p", { id: "user-credit" });
    const keyArea = el("div", { id: "worker-key" });
    const machineColumns = ["#", "Machine", "State", "Units done", "Last seen", ""];
    const testColumns = ["#", "Test", "State", "Result"];
    main.replaceChildren(el("h1", {}, name), status, credit,
      el("section", { "aria-labelledby": "machines-title" }, el("h2", { id: "machines-title" }, "Machines"),
        own ? keyArea : "", cardTable("user-machines", machineColumns, machines)),
      el("section", { "aria-labelledby": "tests-title" }, el("h2", { id: "tests-title" }, "Tests"),
        cardTable("user-tests", testColumns, tests)));
    if (own) {
      const keyName = el("input", { id: "worker-key-name", value: "machines", maxlength: "64" });
      keyArea.replaceChildren(el("form", {
        class: "account",
        onsubmit: async (event) => {
          event.preventDefault();
          try {
            const key = await api("/api/v1/worker-keys", { method: "POST", body: { name: keyName.value } });
            keyArea.replaceChildren(el("p", {}, `Worker key ${key.id} (shown once; keep it in a file, mode 0600, for `,
              el("code", {}, "xq-worker connect --key-file FILE"), "):"),
              el("pre", { id: "worker-key-token" }, key.token));
          } catch (error) {
            sayError(status, error);
          }
        },
      }, el("label", { for: "worker-key-name" }, "A worker key for your machines, named"), keyName,
      el("button", { type: "submit", id: "make-worker-key" }, "Make a worker key")));
    }
    const load = async () => {
      try {
        const page = await api(`/api/v1/users/${encodeURIComponent(name)}`);
        status.textContent = `${page.role || "no role"}, ${page.state}`;
        const all = (page.credit && page.credit.credit && page.credit.credit.all_time) || {};
        credit.textContent = `${fixed(all.cpu_hours || 0, 2)} core-hours and ${all.games || 0} games given.`;
        machines.replaceChildren(...(page.machines || []).map((w) => {
          const c = w.capabilities || {};
          const retire = own && w.standing === "active"
            ? el("button", {
              type: "button",
              class: "retire",
              onclick: async () => {
                try {
                  await api(`/api/v1/workers/${w.worker_id}/retire`, { method: "POST", body: {} });
                  load();
                } catch (error) {
                  sayError(status, error);
                }
              },
            }, "Retire")
            : "";
          const cells = [String(w.worker_id), c.name || "–", w.standing, String(w.units_done || 0), ago(Number(w.last_seen_ms)), retire];
          return el("tr", { "data-worker-id": w.worker_id }, cells.map((cell, i) => el("td", { "data-label": machineColumns[i] }, cell)));
        }));
        tests.replaceChildren(...(page.tests || []).map((job) => {
          const cells = [String(job.job_id), el("a", { href: `/tests/${job.job_id}` }, job.description || `#${job.job_id}`), job.state, job.outcome || "–"];
          return el("tr", { "data-job-id": job.job_id }, cells.map((cell, i) => el("td", { "data-label": testColumns[i] }, cell)));
        }));
      } catch (error) {
        showError(error);
      }
    };
    await load();
  }

  // ---- The API -------------------------------------------------------------------------

  class ApiError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  async function api(path, options = {}) {
    const headers = { Accept: "application/json" };
    const method = options.method || "GET";
    if (method !== "GET" && session) headers["X-CSRF-Token"] = session.csrf;
    if (options.body !== undefined) headers["Content-Type"] = "application/json";
    const response = await fetch(path, {
      method,
      headers,
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
      credentials: "same-origin",
    });
    const text = await response.text();
    let value = null;
    try {
      value = text ? JSON.parse(text) : null;
    } catch {
      throw new ApiError(response.status, `the server answered ${response.status} with something not JSON`);
    }
    if (!response.ok) {
      throw new ApiError(response.status, (value && value.error) || `the server answered ${response.status}`);
    }
    return value;
  }

  function showError(error, where = main) {
    const hint =
      error.status === 401 ? " This dashboard is private, or the action needs a user: log in above." : "";
    where.replaceChildren(el("p", { class: "error", role: "alert" }, `${error.message}.${hint}`));
  }

  // ---- The live stream ----------------------------------------------------------------

  // One EventSource for the whole page; the page in view subscribes to job changes.
  const live = {
    source: null,
    onJobs: null,
    onResync: null,
    start() {
      if (this.source) return;
      this.source = new EventSource("/api/v1/events", { withCredentials: true });
      this.source.addEventListener("open", () => (liveStatus.textContent = "Live"));
      this.source.addEventListener("error", () => (liveStatus.textContent = "Reconnecting to the live stream…"));
      this.source.addEventListener("jobs", (event) => {
        let jobs;
        try {
          jobs = JSON.parse(event.data);
        } catch {
          return;
        }
        if (this.onJobs) this.onJobs(jobs);
      });
      this.source.addEventListener("resync", () => this.onResync && this.onResync());
    },
    follow(onJobs, onResync) {
      this.onJobs = onJobs;
      this.onResync = onResync;
      this.start();
    },
  };

  // ---- Tests ---------------------------------------------------------------------------

  const FILTERS = [
    { name: "state", label: "State", options: ["all", "running", "pending", "finished", "stopped"] },
    { name: "kind", label: "Kind", options: ["all", "sprt", "games", "selfplay", "spsa", "verify"] },
    { name: "q", label: "Search", placeholder: "description or engines" },
    { name: "engine", label: "Engine", placeholder: "name" },
    { name: "submitter", label: "Submitter", placeholder: "token id" },
    { name: "tc", label: "Time control", placeholder: "10+0.1" },
    { name: "bounds", label: "Bounds", placeholder: "0,2" },
  ];

  const TEST_COLUMNS = [
    "#", "Test", "State", "LLR", "Elo [95%]", "Games", "Pentanomial", "TC", "Rules", "Priority",
  ];

  function llrCell(job) {
    if (!job.sprt) return "–";
    const { llr, lower, upper } = job.sprt;
    const fraction = Math.min(1, Math.max(0, (llr - lower) / (upper - lower)));
    return el(
      "span",
      { class: "llr" },
      el("span", {}, fixed(llr, 2)),
      el("span", { class: "bounds" }, ` (${fixed(lower, 2)}, ${fixed(upper, 2)})`),
      el("meter", { min: 0, max: 1, value: fraction.toFixed(3), "aria-label": "LLR between its bounds" }),
    );
  }

  // Tests and SPSA runs play games; self-play and verification jobs do not.
  const isMatchKind = (job) => job.kind !== "selfplay" && job.kind !== "verify";

  function testRow(job) {
    const cells = [
      el("a", { href: `/tests/${job.job_id}` }, String(job.job_id)),
      el("span", {}, el("a", { href: `/tests/${job.job_id}` }, job.description || "(no description)"),
        el("small", {}, job.summary),
        job.source && job.source.info ? el("small", { class: "info" }, job.source.info.split("\n")[0]) : null),
      el("span", { class: `state state-${job.state}` }, stateText(job)),
      llrCell(job),
      isMatchKind(job) ? eloText(job.elo) : "–",
      { selfplay: `${job.positions} positions`, verify: `${job.positions} verified` }[job.kind] || String(games(job)),
      isMatchKind(job) ? pentanomial(job) : "–",
      job.time_control || "–",
      [job.rules, job.variant].filter(Boolean).join(" · ") || "–",
      String(job.priority),
    ];
    return el(
      "tr",
      { "data-job-id": job.job_id },
      cells.map((cell, i) => el("td", { "data-label": TEST_COLUMNS[i] }, cell)),
    );
  }

  function filtersFromUrl() {
    const params = new URLSearchParams(location.search);
    const values = {};
    for (const filter of FILTERS) values[filter.name] = params.get(filter.name) || "";
    return values;
  }

  async function testsPage() {
    document.title = "Tests · xq cluster";
    const values = filtersFromUrl();
    const form = el("form", { class: "filters", role: "search" });
    for (const filter of FILTERS) {
      const id = `filter-${filter.name}`;
      const control = filter.options
        ? el("select", { id, name: filter.name }, filter.options.map((o) => el("option", { value: o === "all" ? "" : o }, o)))
        : el("input", { id, name: filter.name, type: "search", placeholder: filter.placeholder });
      control.value = values[filter.name];
      form.append(el("label", { for: id }, filter.label, control));
    }
    const count = el("p", { class: "count", role: "status" });
    const body = el("tbody");
    const table = el("table", { id: "tests", class: "cards" },
      el("thead", {}, el("tr", {}, TEST_COLUMNS.map((c) => el("th", { scope: "col" }, c)))), body);
    main.replaceChildren(el("h1", {}, "Tests"), form, count, table);

    let shown = new Set();
    // Loads overlap (live updates, a filter typed): only the newest one's reply shows.
    let latest = 0;
    const load = async () => {
      const asked = ++latest;
      const params = new URLSearchParams();
      for (const [name, value] of new FormData(form)) if (value.trim()) params.set(name, value.trim());
      const query = params.toString();
      history.replaceState(null, "", query ? `/?${query}` : "/");
      try {
        const reply = await api(`/api/v1/jobs${query ? "?" + query : ""}`);
        if (asked !== latest) return;
        const jobs = reply.jobs || [];
        body.replaceChildren(...jobs.map(testRow));
        shown = new Set(jobs.map((job) => job.job_id));
        // The API answers the newest 100 unless asked for more.
        count.textContent = jobs.length === 1 ? "1 job"
          : jobs.length >= 100 ? `The newest ${jobs.length} jobs: narrow the filters to find older ones.` : `${jobs.length} jobs`;
      } catch (error) {
        if (asked !== latest) return;
        count.textContent = "";
        showError(error, body);
      }
    };
    let typing = null;
    form.addEventListener("input", () => {
      clearTimeout(typing);
      typing = setTimeout(load, 250);
    });
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      load();
    });
    const reload = throttled(load, 1000);
    live.follow((jobs) => {
      // A job already listed changes in place; any other may now match the filters.
      let unseen = false;
      for (const job of jobs) {
        const row = body.querySelector(`tr[data-job-id="${job.job_id}"]`);
        if (row && shown.has(job.job_id)) row.replaceWith(testRow(job));
        else unseen = true;
      }
      if (unseen || jobs.some((job) => values.state && job.state !== values.state)) reload();
    }, reload);
    await load();
  }

  // ---- A test -------------------------------------------------------------------------

  /** A uPlot chart in `holder`, resized with it. */
  function chart(holder, options, data) {
    const width = () => Math.max(240, holder.clientWidth);
    const plot = new uPlot({ width: width(), height: 240, ...options }, data, holder);
    new ResizeObserver(() => plot.setSize({ width: width(), height: 240 })).observe(holder);
    return plot;
  }

  const timeAxis = { stroke: "currentColor", grid: { stroke: "rgba(128,128,128,0.2)" } };
  const valueAxis = { stroke: "currentColor", grid: { stroke: "rgba(128,128,128,0.2)" }, size: 50 };

  function historyCharts(llrHolder, eloHolder, hasSprt) {
    const empty = [[], [], [], []];
    const llr = hasSprt
      ? chart(llrHolder, {
        title: "LLR",
        scales: { x: { time: false } },
        axes: [{ ...timeAxis, label: "pairs" }, valueAxis],
        series: [
          { label: "pairs" },
          { label: "LLR", stroke: "#2563eb", width: 2 },
          { label: "H0 bound", stroke: "#dc2626", dash: [6, 4] },
          { label: "H1 bound", stroke: "#16a34a", dash: [6, 4] },
        ],
      }, empty)
      : null;
    const elo = chart(eloHolder, {
      title: "Elo and its 95% interval",
      scales: { x: { time: false } },
      axes: [{ ...timeAxis, label: "pairs" }, valueAxis],
      series: [
        { label: "pairs" },
        { label: "Elo", stroke: "#7c3aed", width: 2 },
        { label: "low", stroke: "#a78bfa", dash: [4, 4] },
        { label: "high", stroke: "#a78bfa", dash: [4, 4] },
      ],
      bands: [{ series: [3, 2], fill: "rgba(124,58,237,0.12)" }],
    }, empty);
    return (history) => {
      const points = history.points || [];
      const pairs = points.map((p) => p.pairs);
      if (llr) llr.setData([pairs, points.map((p) => p.llr), pairs.map(() => history.lower), pairs.map(() => history.upper)]);
      elo.setData([pairs, points.map((p) => p.elo), points.map((p) => p.elo_low), points.map((p) => p.elo_high)]);
    };
  }

  const PARAMETER_COLOURS = ["#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#65a30d"];

  /** An SPSA run's theta over its pairs, a line per parameter. */
  function spsaChart(holder, names) {
    const plot = chart(holder, {
      title: "Theta",
      scales: { x: { time: false } },
      axes: [{ ...timeAxis, label: "pairs" }, valueAxis],
      series: [{ label: "pairs" }, ...names.map((name, i) => ({
        label: name, stroke: PARAMETER_COLOURS[i % PARAMETER_COLOURS.length], width: 2,
      }))],
    }, [[], ...names.map(() => [])]);
    return (samples) => plot.setData([
      samples.map((s) => Number(s.pairs)),
      ...names.map((_, i) => samples.map((s) => s.theta[i])),
    ]);
  }

  /** An SPSA run's parameters: where theta stands, and the line to paste. */
  function spsaRows(spsa) {
    return (spsa.parameters || []).map((p) => el("tr", { "data-parameter": p.name },
      el("th", { scope: "row", "data-label": "Parameter" }, p.name),
      el("td", { "data-label": "Value", class: "value" }, fixed(p.value, 2)),
      el("td", { "data-label": "Start" }, String(p.start)),
      el("td", { "data-label": "Range" }, `${p.min} … ${p.max}`),
      el("td", { "data-label": "UCI" }, el("code", {}, `setoption name ${p.name} value ${Math.round(p.value)}`))));
  }

  function definitionList(entries) {
    return el("dl", { class: "facts" }, entries.map(([term, value, id]) =>
      el("div", {}, el("dt", {}, term), el("dd", id ? { id } : {}, value))));
  }

  function halfPoints(points) {
    return ["0", "½", "1"][points] || "?";
  }

  /** Per-worker contributions over the pairs shown, with fishtest-style residuals: how
   * many standard errors a worker's mean pair score lies from everyone's. */
  function workerResiduals(pairs) {
    const scores = pairs.map((p) => (p.points || []).reduce((a, b) => a + b, 0) / 4);
    const n = scores.length;
    if (n === 0) return [];
    const mean = scores.reduce((a, b) => a + b, 0) / n;
    const variance = scores.reduce((a, s) => a + (s - mean) ** 2, 0) / Math.max(1, n - 1);
    const byWorker = new Map();
    pairs.forEach((pair, i) => {
      const entry = byWorker.get(pair.worker_id) || { worker: pair.worker_id, user: pair.user || "", pairs: 0, sum: 0, last: 0 };
      entry.pairs += 1;
      entry.sum += scores[i];
      entry.last = Math.max(entry.last, pair.time_ms || 0);
      byWorker.set(pair.worker_id, entry);
    });
    return [...byWorker.values()].map((entry) => {
      const score = entry.sum / entry.pairs;
      const error = Math.sqrt(variance / entry.pairs);
      return { ...entry, score, residual: error > 0 ? (score - mean) / error : 0 };
    });
  }

  // What a test tests: its repository, each side's branch and commit, the forge's
  // compare page and the author's words. The repository is an http(s) address (the
  // coordinator refuses any other), and every text goes in as text.
  function sourceSection(job) {
    const s = job.source;
    const entries = [];
    if (s.repository) entries.push(["Repository", el("a", { href: s.repository, rel: "noopener" }, s.repository)]);
    const sides = [[job.new_engine, s.new_branch, s.new_commit], [job.base_engine, s.base_branch, s.base_commit]];
    for (const [name, branch, commit] of sides) {
      const at = [branch, commit].filter(Boolean).join(" at ");
      if (at) entries.push([name, at]);
    }
    if (job.compare_url) entries.push(["Changes", el("a", { href: job.compare_url, id: "compare", rel: "noopener" }, "compare")]);
    return el("section", { "aria-labelledby": "source-title", id: "source" },
      el("h2", { id: "source-title" }, "What it tests"),
      s.info ? el("p", { id: "info", class: "info-text" }, s.info) : null,
      definitionList(entries));
  }

  async function testPage(id) {
    document.title = `Test ${id} · xq cluster`;
    let job;
    try {
      job = await api(`/api/v1/jobs/${id}`);
    } catch (error) {
      showError(error);
      return;
    }
    const isVerification = job.kind === "verify";
    const isMatch = isMatchKind(job);
    const heading = el("h1", {}, `#${job.job_id} `, el("span", { id: "description" }));
    const stateBadge = el("span", { id: "state", class: "state" });
    const facts = el("div", { class: "facts-holder" });
    const reasons = el("div");
    const actions = el("div", { class: "actions" });
    const llrHolder = el("div", { id: "llr-chart", class: "chart" });
    const eloHolder = el("div", { id: "elo-chart", class: "chart" });
    const pairsBody = el("tbody");
    const contributors = el("tbody");
    const pairsNote = el("p", { class: "count" });
    const spsaHolder = el("div", { id: "spsa-chart", class: "chart" });
    const spsaBody = el("tbody");
    const spsaNote = el("p", { class: "count", id: "spsa-iterations" });

    const sections = [heading, el("p", {}, stateBadge, " ", el("span", { id: "summary" })), facts, actions];
    if (job.spsa) {
      sections.push(el("section", { "aria-labelledby": "spsa-title" },
        el("h2", { id: "spsa-title" }, "Parameters"), spsaNote,
        el("table", { class: "cards", id: "spsa-parameters" },
          el("thead", {}, el("tr", {}, ["Parameter", "Value", "Start", "Range", "UCI"].map((c) => el("th", { scope: "col" }, c)))),
          spsaBody),
        el("div", { class: "charts" }, spsaHolder)));
    }
    if (isMatch) {
      sections.push(
        el("section", { "aria-labelledby": "charts-title" },
          el("h2", { id: "charts-title" }, "Over time"), el("div", { class: "charts" }, llrHolder, eloHolder)),
        el("section", { "aria-labelledby": "reasons-title" }, el("h2", { id: "reasons-title" }, "How the games ended"), reasons),
        el("section", { "aria-labelledby": "workers-title" },
          el("h2", { id: "workers-title" }, "Workers"),
          el("p", { class: "note" }, "Each worker's mean score per pair over the pairs below, and its residual: ",
            "how many standard errors it lies from everyone's. A residual beyond ±2.7 is unlikely to be chance."),
          el("table", { class: "cards", id: "contributors" },
            el("thead", {}, el("tr", {}, ["Worker", "User", "Pairs", "Score", "Residual", "Last pair"].map((c) => el("th", { scope: "col" }, c)))),
            contributors)),
        el("section", { "aria-labelledby": "pairs-title" },
          el("h2", { id: "pairs-title" }, "Games"),
          el("p", {}, el("a", { href: `/api/v1/jobs/${id}/games.pgn`, download: `job-${id}.pgn` }, "Download every game (PGN)")),
          pairsNote,
          el("table", { class: "cards", id: "pairs" },
            el("thead", {}, el("tr", {}, ["Pair", "Worker", "New as Red", "New as Black", "Endings", "Counted", ""].map((c) => el("th", { scope: "col" }, c)))),
            pairsBody)),
      );
    }
    const verificationNote = el("p", { class: "count", id: "verification-counts" });
    const verificationKinds = el("tbody");
    const verificationArticles = el("tbody");
    if (isVerification) {
      const countTable = (id, title, body) => el("table", { class: "cards", id },
        el("thead", {}, el("tr", {}, [title, "Games"].map((c) => el("th", { scope: "col" }, c)))), body);
      sections.push(el("section", { "aria-labelledby": "verification-title" },
        el("h2", { id: "verification-title" }, "Where the rule sets part"), verificationNote,
        el("p", {},
          el("a", { href: `/api/v1/jobs/${id}/verification.jsonl`, download: `verification-${id}.jsonl` }, "Download the report (JSON lines)"),
          " · ",
          el("a", { href: `/api/v1/jobs/${id}/parting.pgn`, download: `verification-${id}.pgn` }, "the parting games (PGN)")),
        countTable("verification-kinds", "Rule sets and how they part", verificationKinds),
        countTable("verification-articles", "Articles applied", verificationArticles)));
    }
    // What workers reported they could not do with this job (an engine that does not
    // start, another bench signature, ...): hidden until there is a report.
    const failuresBody = el("tbody");
    const failuresSection = el("section", { "aria-labelledby": "failures-title", id: "failures", hidden: "" },
      el("h2", { id: "failures-title" }, "Failures reported"),
      el("p", { class: "note" }, "Workers that could not play this job, and what they saw. None of its work goes to them again."),
      el("table", { class: "cards", id: "failures-table" },
        el("thead", {}, el("tr", {}, ["Kind", "Engine", "Worker", "When", "What it saw"].map((c) => el("th", { scope: "col" }, c)))),
        failuresBody));
    sections.splice(4, 0, failuresSection);
    if (job.source) sections.splice(3, 0, sourceSection(job));
    main.replaceChildren(...sections);

    const drawHistory = isMatch ? historyCharts(llrHolder, eloHolder, Boolean(job.sprt)) : null;
    const drawSpsa = job.spsa ? spsaChart(spsaHolder, job.spsa.parameters.map((p) => p.name)) : null;
    if (isMatch && !job.sprt) llrHolder.remove();

    const showJob = (job) => {
      document.getElementById("description").textContent = job.description || "(no description)";
      stateBadge.textContent = stateText(job);
      stateBadge.className = `state state-${job.state}`;
      document.getElementById("summary").textContent = job.summary;
      const t = job.totals || {};
      const entries = [];
      if (job.sprt) {
        entries.push(["LLR", fixed(job.sprt.llr, 2), "llr"]);
        entries.push(["Bounds", `${fixed(job.sprt.lower, 2)} … ${fixed(job.sprt.upper, 2)}`]);
      }
      if (job.sprt_spec) {
        const s = job.sprt_spec;
        entries.push(["Hypotheses", `[${s.elo0}, ${s.elo1}] ${s.model || "normalized"}${s.trinomial ? ", trinomial" : ""}, α ${s.alpha}, β ${s.beta}`]);
      }
      if (isMatch) {
        entries.push(["Elo [95%]", eloText(job.elo)]);
        if (job.elo) {
          entries.push(["nElo", signed(job.elo.nelo, 1)]);
          entries.push(["LOS", `${fixed(job.elo.los * 100, 1)}%`]);
          entries.push(["Draw ratio", `${fixed(job.elo.draw_ratio * 100, 1)}%`]);
        }
        entries.push(["Games", String(games(job)), "games"]);
        entries.push(["W / D / L", `${t.wins || 0} / ${t.draws || 0} / ${t.losses || 0}`, "wdl"]);
        entries.push(["Pentanomial (0…2)", pentanomial(job), "pentanomial"]);
        entries.push(["Engines", `${job.new_engine} vs ${job.base_engine}`]);
        entries.push(["Time control", job.time_control || "–"]);
        entries.push(["Rules", job.rules || "–"]);
        entries.push(["Book", job.book ? job.book.name : "start position", "book"]);
      } else if (isVerification) {
        entries.push(["Games verified", String(job.positions), "positions"]);
        entries.push(["Rule sets", job.rules || "–"]);
        if (Number(job.rechecks_pending || 0) > 0) {
          entries.push(["Re-checks pending", String(job.rechecks_pending), "rechecks"]);
        }
      } else {
        entries.push(["Positions", String(job.positions), "positions"]);
      }
      entries.push(["Variant", job.variant || "xiangqi"]);
      if (job.lineage) {
        entries.push(["Lineage", el("a", { href: `/nets?lineage=${encodeURIComponent(job.lineage)}` }, job.lineage), "job-lineage"]);
      }
      entries.push(["Units", `${job.units_done} of ${job.units_total}`]);
      entries.push(["Leases in flight", String(job.active_leases)]);
      entries.push([job.kind === "selfplay" ? "Refused chunks" : "Refused reports", String(job.refused_reports || 0), "refused"]);
      entries.push(["Priority", String(job.priority), "priority"]);
      entries.push(["Submitter", job.submitter || "–", "submitter"]);
      entries.push(["Created", when(Number(job.created_ms))]);
      if (Number(job.ended_ms || 0) > 0) {
        const lasted = span(Number(job.ended_ms) - Number(job.created_ms));
        entries.push(["Ended", `${when(Number(job.ended_ms))} (${lasted} after its creation)`, "job-ended"]);
      }
      if (Number(job.data_removed_ms || 0) > 0) {
        const what = { selfplay: "Training data", verify: "Reports" }[job.kind] || "Games";
        entries.push([what, `removed ${when(Number(job.data_removed_ms))} (retention)`, "data-removed"]);
      }
      facts.replaceChildren(definitionList(entries));
      const failures = [...(job.failures || [])]
        .sort((a, b) => (a.kind + a.engine).localeCompare(b.kind + b.engine) || Number(a.time_ms) - Number(b.time_ms));
      failuresSection.hidden = failures.length === 0;
      failuresBody.replaceChildren(...failures.map((f) => el("tr", {},
        el("td", { "data-label": "Kind" }, f.kind),
        el("td", { "data-label": "Engine" }, f.engine || "–"),
        el("td", { "data-label": "Worker" }, `${f.worker_name || "?"} (#${f.worker_id})`),
        el("td", { "data-label": "When" }, when(Number(f.time_ms))),
        el("td", { "data-label": "What it saw" }, el("pre", { class: "failure-detail" }, f.detail)))));
      if (job.spsa) {
        spsaBody.replaceChildren(...spsaRows(job.spsa));
        spsaNote.textContent = `Theta after ${job.spsa.iterations} pairs (A ${job.spsa.big_a}, alpha ${job.spsa.alpha}, gamma ${job.spsa.gamma}).`;
      }
      if (isMatch) {
        const ended = Object.entries(job.reasons || {}).sort((a, b) => b[1] - a[1]);
        reasons.replaceChildren(ended.length
          ? el("table", { id: "reasons" }, el("tbody", {}, ended.map(([reason, n]) =>
            el("tr", {}, el("th", { scope: "row" }, reason), el("td", {}, String(n))))))
          : el("p", {}, "No game has ended yet."));
        // Engines that do not know the chase rules lose games to the arbiter, and
        // engines that overdraw their clocks lose to the clock, not on the board: those
        // wins are counted apart, and the results shown without them.
        const board = job.over_the_board || {};
        const apart = [["by a repetition ruling", board.new_ruled_wins, board.base_ruled_wins],
          ["on time", board.new_forfeit_wins, board.base_forfeit_wins]]
          .filter(([, ours, theirs]) => Number(ours || 0) + Number(theirs || 0) > 0)
          .map(([how, ours, theirs]) =>
            `Won ${how}: ${job.new_engine} ${ours || 0}, ${job.base_engine} ${theirs || 0}. `);
        if (apart.length > 0) {
          reasons.append(el("p", { id: "over-the-board" }, apart.join("")
            + `Over the board (those as draws): `
            + `pentanomial [${(board.pentanomial || []).join(", ")}], Elo ${eloText(board.elo)}.`));
        }
      }
      showActions(job);
    };

    const message = el("span", { role: "status", class: "message" });
    const showActions = (job) => {
      if (job.state !== "running") {
        actions.replaceChildren(message);
        return;
      }
      if (actions.querySelector("form")) return;
      const priority = el("input", { type: "number", id: "priority-input", value: job.priority, step: 1, "aria-label": "New priority" });
      const act = async (path, body, done) => {
        try {
          const updated = await api(`/api/v1/jobs/${id}/${path}`, { method: "POST", body });
          message.textContent = done;
          showJob(updated);
        } catch (error) {
          message.textContent = error.status === 401 || error.status === 403
            ? `${error.message}: save a client token above.` : error.message;
        }
      };
      actions.replaceChildren(el("form", {
        onsubmit: (event) => {
          event.preventDefault();
          act("priority", { priority: Number(priority.value) }, "Priority changed.");
        },
      }, el("label", { for: "priority-input" }, "Priority "), priority, el("button", { type: "submit" }, "Set")),
      el("button", {
        type: "button", class: "danger", id: "stop",
        onclick: () => confirm(`Stop test ${id}?`) && act("stop", {}, "Stopped."),
      }, "Stop the test"), message);
    };

    const loadHistory = async () => {
      try {
        const history = await api(`/api/v1/jobs/${id}/history`);
        drawHistory(history);
        if (drawSpsa) drawSpsa(history.spsa || []);
      } catch (error) {
        pairsNote.textContent = error.message;
      }
    };
    let pairsWanted = 100;
    const loadPairs = async () => {
      try {
        const reply = await api(`/api/v1/jobs/${id}/pairs?limit=${pairsWanted}`);
        const pairs = reply.pairs || [];
        pairsBody.replaceChildren(...pairs.map((pair) => {
          const points = pair.points || [];
          const cells = [
            String(pair.unit),
            String(pair.worker_id),
            halfPoints(points[0]),
            halfPoints(points[1]),
            (pair.reasons || []).join("; "),
            when(Number(pair.time_ms)),
            el("a", { href: `/tests/${id}/pairs/${pair.unit}` }, "Replay"),
          ];
          const labels = ["Pair", "Worker", "New as Red", "New as Black", "Endings", "Counted", "Games"];
          return el("tr", { "data-unit": pair.unit }, cells.map((c, i) => el("td", { "data-label": labels[i] }, c)));
        }));
        contributors.replaceChildren(...workerResiduals(pairs).map((w) => el("tr", { class: Math.abs(w.residual) > 2.7 ? "suspect" : "" },
          el("td", { "data-label": "Worker" }, String(w.worker)),
          el("td", { "data-label": "User" }, w.user || "–"),
          el("td", { "data-label": "Pairs" }, String(w.pairs)),
          el("td", { "data-label": "Score" }, `${fixed(w.score * 100, 1)}%`),
          el("td", { "data-label": "Residual" }, signed(w.residual, 2)),
          el("td", { "data-label": "Last pair" }, when(w.last)))));
        pairsNote.replaceChildren(`${pairs.length} pairs shown, in pair order.`);
        if (pairs.length === pairsWanted && pairsWanted < 1000) {
          pairsNote.append(" ", el("button", {
            type: "button",
            onclick: () => {
              pairsWanted = Math.min(1000, pairsWanted * 4);
              loadPairs();
            },
          }, "Show more"));
        }
      } catch (error) {
        pairsNote.textContent = error.message;
      }
    };

    const loadVerification = async () => {
      try {
        const v = await api(`/api/v1/jobs/${id}/verification`);
        verificationNote.textContent = `${v.games} of ${v.games_total} games verified under ${(v.rules || []).join(", ")}: `
          + `${v.parting} where the rule sets part, ${v.refused} that could not be replayed.`;
        const rows = (counts, label) => Object.entries(counts || {}).sort((a, b) => b[1] - a[1])
          .map(([name, n]) => el("tr", {}, el("td", { "data-label": label }, name), el("td", { "data-label": "Games" }, String(n))));
        verificationKinds.replaceChildren(...rows(v.by_kind, "Rule sets and how they part"));
        verificationArticles.replaceChildren(...rows(v.by_articles, "Articles applied"));
      } catch (error) {
        verificationNote.textContent = error.message;
      }
    };

    showJob(job);
    // What besides the job's facts follows it live: a match's charts and pairs, a
    // verification's counts.
    const reload = isMatch ? () => Promise.all([loadHistory(), loadPairs()]) : isVerification ? loadVerification : null;
    const refresh = reload ? throttled(reload, 1000) : () => {};
    live.follow((jobs) => {
      const changed = jobs.find((j) => j.job_id === job.job_id);
      if (!changed) return;
      showJob(changed);
      refresh();
    }, async () => {
      showJob(await api(`/api/v1/jobs/${id}`));
      refresh();
    });
    if (reload) await reload();
  }

  // ---- The board viewer -------------------------------------------------------------

  // Piece names by FEN letter: Red (South) upper case, Black (North) lower case.
  const CHINESE = {
    xiangqi: {
      K: "帥", A: "仕", B: "相", E: "相", N: "傌", H: "傌", R: "俥", C: "炮", P: "兵",
      k: "將", a: "士", b: "象", e: "象", n: "馬", h: "馬", r: "車", c: "砲", p: "卒",
    },
    // xiongqi-rules.txt 2.4.
    xiongqi: {
      G: "帥", A: "仕", R: "俥", B: "雄", H: "傌", C: "炮", S: "兵", D: "鳳", E: "妃",
      g: "將", a: "士", r: "車", b: "熊", h: "馬", c: "砲", s: "卒", d: "龍", e: "騛",
    },
  };

  /** The board of a FEN as rows of letters (null: empty), top row first. */
  function parseBoard(fen) {
    const rows = fen.split(" ")[0].split("/");
    return rows.map((row) => {
      const squares = [];
      for (const match of row.matchAll(/(\d+)|([A-Za-z])/g)) {
        if (match[1]) for (let i = 0; i < Number(match[1]); i++) squares.push(null);
        else squares.push(match[2]);
      }
      return squares;
    });
  }

  const CELL = 40;
  const MARGIN = 30;

  /** The SVG board of `fen`, with the move `move` (UCI text) marked. */
  function board(fen, move, variant, chinese) {
    const rows = parseBoard(fen);
    const height = rows.length;
    const width = Math.max(...rows.map((r) => r.length));
    const x = (file) => MARGIN + file * CELL;
    const y = (row) => MARGIN + row * CELL;
    const svg = el("svg:svg", {
      viewBox: `0 0 ${2 * MARGIN + (width - 1) * CELL} ${2 * MARGIN + (height - 1) * CELL}`,
      class: "board", role: "img", "aria-label": `Position ${fen}`,
    });
    const line = (x1, y1, x2, y2) => svg.append(el("svg:line", { x1, y1, x2, y2, class: "grid" }));
    const riverTop = height / 2 - 1;
    for (let row = 0; row < height; row++) line(x(0), y(row), x(width - 1), y(row));
    for (let file = 0; file < width; file++) {
      const edge = file === 0 || file === width - 1;
      if (edge) line(x(file), y(0), x(file), y(height - 1));
      else {
        line(x(file), y(0), x(file), y(riverTop));
        line(x(file), y(riverTop + 1), x(file), y(height - 1));
      }
    }
    if (variant !== "xiongqi" && width === 9 && height === 10) {
      for (const top of [0, 7]) {
        line(x(3), y(top), x(5), y(top + 2));
        line(x(5), y(top), x(3), y(top + 2));
      }
    }
    svg.append(el("svg:text", { x: x((width - 1) / 2), y: y(riverTop + 0.5), class: "river" },
      chinese ? "楚 河　　漢 界" : "river"));
    for (let file = 0; file < width; file++) {
      svg.append(el("svg:text", { x: x(file), y: y(height - 1) + MARGIN * 0.85, class: "coordinate" },
        String.fromCharCode(97 + file)));
    }
    const rankBase = variant === "xiongqi" ? 1 : 0;
    for (let row = 0; row < height; row++) {
      svg.append(el("svg:text", { x: MARGIN * 0.3, y: y(row) + 4, class: "coordinate" }, String(height - 1 - row + rankBase)));
    }
    const squares = /^([a-z])(\d+)([a-z])(\d+)/.exec(move || "");
    if (squares) {
      for (const [file, rank] of [[squares[1], squares[2]], [squares[3], squares[4]]]) {
        const f = file.charCodeAt(0) - 97;
        const r = height - 1 - (Number(rank) - rankBase);
        svg.append(el("svg:rect", { x: x(f) - CELL / 2, y: y(r) - CELL / 2, width: CELL, height: CELL, rx: 6, class: "last-move" }));
      }
    }
    const names = CHINESE[variant === "xiongqi" ? "xiongqi" : "xiangqi"];
    rows.forEach((squaresOfRow, row) => squaresOfRow.forEach((letter, file) => {
      if (!letter) return;
      const red = letter === letter.toUpperCase();
      const label = chinese ? names[letter] || letter : letter.toUpperCase();
      svg.append(el("svg:g", { class: `piece ${red ? "red" : "black"}`, "data-piece": letter, "data-square": `${file},${row}` },
        el("svg:circle", { cx: x(file), cy: y(row), r: CELL * 0.44 }),
        el("svg:text", { x: x(file), y: y(row) + (chinese ? 7 : 6) }, label)));
    }));
    return svg;
  }

  /** Whether this browser has a font for the pieces' characters: without one they
   * would be drawn as empty boxes, so the board starts with Latin letters. */
  function canDrawCharacters() {
    const context = document.createElement("canvas").getContext("2d");
    if (!context) return true;
    context.font = "20px sans-serif";
    // A private-use character is drawn as the missing-glyph box in every font.
    const missing = context.measureText("\u{F8FF}\u{F8FF}").width;
    return context.measureText("帥將").width !== missing;
  }

  function describePly(ply) {
    if (!ply) return "The start position.";
    const natures = (ply.natures && ply.natures.length ? ply.natures : [ply.nature]).filter(Boolean);
    let text = `${ply.move}: ${natures.join(", ") || "idle"}`;
    const chases = ply.chases || [];
    if (chases.length) {
      text += "; chases " + chases.map((c) => `${c.target} (by ${(c.by || []).join(", ")})`).join("; ");
    }
    return text;
  }

  async function viewerPage(id, unit) {
    document.title = `Test ${id}, pair ${unit} · xq cluster`;
    let pair;
    try {
      pair = await api(`/api/v1/jobs/${id}/pairs/${unit}`);
    } catch (error) {
      showError(error);
      return;
    }
    const gamesOfPair = (pair.games || []).map((game) => {
      let judgement = { plies: [] };
      try {
        judgement = JSON.parse(game.judgement_json);
      } catch {
        // Shown as an empty replay with the raw text below.
      }
      return { ...game, judgement };
    });
    if (gamesOfPair.length === 0) {
      main.replaceChildren(el("p", { class: "error" }, "This pair holds no games."));
      return;
    }
    let gameIndex = 0;
    let ply = 0;
    const saved = localStorage.getItem("xq_chinese");
    let chinese = saved === null ? canDrawCharacters() : saved === "true";

    const holder = el("div", { class: "board-holder" });
    const plyInfo = el("p", { id: "ply-info", role: "status", "aria-live": "polite" });
    const fenText = el("code", { id: "fen" });
    const ruling = el("p", { id: "ruling" });
    const moveList = el("ol", { id: "moves", class: "moves" });
    const gameChoice = el("div", { class: "game-choice", role: "group", "aria-label": "Game" });
    const plyCounter = el("span", { id: "ply" });

    const game = () => gamesOfPair[gameIndex];
    const plies = () => game().judgement.plies || [];
    const fenAt = (n) => (n === 0 ? game().start_fen : plies()[n - 1].fen);

    const draw = () => {
      const current = plies()[ply - 1];
      holder.replaceChildren(board(fenAt(ply), current && current.move, pair.variant, chinese));
      plyInfo.textContent = describePly(current);
      fenText.textContent = fenAt(ply);
      plyCounter.textContent = `${ply} / ${plies().length}`;
      for (const item of moveList.querySelectorAll(".ply")) item.classList.toggle("current", Number(item.dataset.ply) === ply);
      // Keep the current move in view inside the list, without scrolling the page.
      const active = moveList.querySelector(".current");
      if (active) {
        const top = active.offsetTop; // the list is positioned: its offsetParent
        if (top < moveList.scrollTop) moveList.scrollTop = top;
        else if (top + active.offsetHeight > moveList.scrollTop + moveList.clientHeight) {
          moveList.scrollTop = top + active.offsetHeight - moveList.clientHeight;
        }
      }
    };
    const go = (n) => {
      ply = Math.max(0, Math.min(plies().length, n));
      draw();
    };
    const selectGame = (index) => {
      gameIndex = index;
      const tags = game().tags || {};
      const j = game().judgement;
      // The judge rules on the moves alone; a game that ended otherwise (time,
      // adjudication, resignation) has its result and reason in its tags.
      const ruled = j.result && j.result !== "*";
      const players = `${tags.Red || tags.White || "Red"} – ${tags.Black || "Black"}`;
      ruling.replaceChildren(
        el("strong", {}, `${players}: ${ruled ? j.result : tags.Result || "*"}`),
        ruled && j.reason ? ` by ${j.reason}` : "",
        ruled && j.article ? el("span", { class: "article" }, ` (${j.article})`) : "",
        !ruled && tags.Termination ? ` (${tags.Termination}; the rules rule nothing in these moves)` : "",
      );
      const button = (p, n) => el("span", { class: "ply", "data-ply": n },
        el("button", { type: "button", onclick: () => go(n) }, p.move),
        p.nature && p.nature !== "idle" ? el("span", { class: `nature nature-${p.nature}` }, p.nature) : "");
      const moves = [];
      for (let n = 1; n <= plies().length; n += 2) {
        moves.push(el("li", {}, button(plies()[n - 1], n), plies()[n] ? button(plies()[n], n + 1) : ""));
      }
      moveList.replaceChildren(...moves);
      for (const [i, button] of [...gameChoice.children].entries()) button.setAttribute("aria-pressed", String(i === index));
      go(plies().length);
    };
    gameIndex = 0;
    gamesOfPair.forEach((g, i) => gameChoice.append(el("button", { type: "button", onclick: () => selectGame(i) },
      `Game ${i + 1}: new engine as ${i === 0 ? "Red" : "Black"}`)));

    const controls = el("div", { class: "controls" },
      el("button", { type: "button", onclick: () => go(0), "aria-label": "First position", id: "first" }, "«"),
      el("button", { type: "button", onclick: () => go(ply - 1), "aria-label": "Previous move", id: "previous" }, "◀"),
      plyCounter,
      el("button", { type: "button", onclick: () => go(ply + 1), "aria-label": "Next move", id: "next" }, "▶"),
      el("button", { type: "button", onclick: () => go(plies().length), "aria-label": "Last position", id: "last" }, "»"),
      el("label", {}, el("input", {
        type: "checkbox", id: "chinese", checked: chinese,
        onchange: (event) => {
          chinese = event.target.checked;
          localStorage.setItem("xq_chinese", String(chinese));
          draw();
        },
      }), " Chinese characters"));

    main.replaceChildren(
      el("h1", {}, el("a", { href: `/tests/${id}` }, `Test ${id}`), `, pair ${pair.unit}`),
      el("p", {}, `${pair.variant} under ${pair.rules} rules. `, el("span", { class: "note" }, "Keys: ← → move, Home/End jump.")),
      gameChoice,
      el("div", { class: "viewer" },
        el("div", {}, holder, controls, plyInfo, el("p", {}, "FEN: ", fenText)),
        el("div", {}, ruling, moveList)),
      el("details", {}, el("summary", {}, "The pair's PGN"), el("pre", { class: "pgn" }, pair.pgn)),
    );
    document.onkeydown = (event) => {
      if (event.target.closest && event.target.closest("input, select, textarea")) return;
      const moves = { ArrowLeft: ply - 1, ArrowRight: ply + 1, Home: 0, End: plies().length };
      if (event.key in moves) {
        event.preventDefault();
        go(moves[event.key]);
      }
    };
    selectGame(0);
  }

  // ---- Workers ---------------------------------------------------------------------

  // A worker that has not been heard from in this long is shown offline (heartbeats
  // come every few seconds while it works).
  const ONLINE_MS = 120000;

  async function workersPage() {
    document.title = "Workers · xq cluster";
    const body = el("tbody");
    const count = el("p", { class: "count", role: "status" });
    const columns = ["#", "Name", "User", "State", "Jobs", "Units done", "Refused", "Cores", "Speed (nps)", "Leases", "Version", "CPU", "Last seen"];
    main.replaceChildren(el("h1", {}, "Workers"), count,
      el("table", { id: "workers", class: "cards" },
        el("thead", {}, el("tr", {}, columns.map((c) => el("th", { scope: "col" }, c)))), body));
    const load = async () => {
      try {
        const reply = await api("/api/v1/workers");
        const workers = reply.workers || [];
        const online = workers.filter((w) => Date.now() - Number(w.last_seen_ms) < ONLINE_MS).length;
        count.textContent = `${online} of ${workers.length} online`;
        body.replaceChildren(...workers.map((w) => {
          const c = w.capabilities || {};
          const isOnline = Date.now() - Number(w.last_seen_ms) < ONLINE_MS;
          const flags = (c.cpu_flags || []).filter((f) => /^(avx2|avx512bw|bmi2|neon|sse4_1|popcnt)$/.test(f));
          const cells = [
            String(w.worker_id), c.name || "–", w.user || "–",
            w.standing && w.standing !== "active"
              ? el("span", { class: "state state-stopped error", title: w.standing_reason || "" },
                `${w.standing}${w.standing_reason ? `: ${w.standing_reason}` : ""}`)
              : el("span", { class: isOnline ? "state state-running" : "state state-stopped" }, isOnline ? "online" : "offline"),
            (w.job_ids || []).length
              ? el("span", {}, (w.job_ids || []).map((job, i) => [i ? ", " : "", el("a", { href: `/tests/${job}` }, `#${job}`)]))
              : "idle",
            String(w.units_done || 0),
            el("span", { class: w.refused_reports ? "error" : "" }, String(w.refused_reports || 0)),
            String(c.cores || 0), (c.bench_nps || 0).toLocaleString(), String(w.active_leases),
            c.version || "–", flags.join(" ") || "–", ago(Number(w.last_seen_ms)),
          ];
          return el("tr", { "data-worker-id": w.worker_id }, cells.map((cell, i) => el("td", { "data-label": columns[i] }, cell)));
        }));
      } catch (error) {
        showError(error, body);
      }
    };
    await load();
    const timer = setInterval(() => (document.body.contains(body) ? load() : clearInterval(timer)), 5000);
  }

  // ---- Contributors ----------------------------------------------------------------

  /** A credit's cells: core-hours and games, all time and the last 30 days. */
  function creditCells(credit) {
    const all = (credit && credit.all_time) || {};
    const recent = (credit && credit.last_30_days) || {};
    return [fixed(all.cpu_hours || 0, 2), String(all.games || 0), fixed(recent.cpu_hours || 0, 2), String(recent.games || 0)];
  }

  async function contributorsPage() {
    document.title = "Contributors · xq cluster";
    const users = el("tbody");
    const machines = el("tbody");
    const note = el("p", { class: "count", role: "status" });
    const creditColumns = ["Core-hours", "Games", "Core-hours (30 days)", "Games (30 days)"];
    const userColumns = ["User", "Machines", ...creditColumns];
    const machineColumns = ["#", "Machine", "User", ...creditColumns];
    main.replaceChildren(el("h1", {}, "Contributors"), note,
      el("p", { class: "note" }, "The CPU time volunteers' machines gave to work that counted: the cores each lease held for as long as it took to report its units. Work set aside (a quarantined machine's) and refused reports earn nothing."),
      el("section", { "aria-labelledby": "users-title" }, el("h2", { id: "users-title" }, "Users"), cardTable("contributors", userColumns, users)),
      el("section", { "aria-labelledby": "machines-title" }, el("h2", { id: "machines-title" }, "Machines"), cardTable("machines", machineColumns, machines)));
    const row = (attributes, columns, cells) => el("tr", attributes, cells.map((cell, i) => el("td", { "data-label": columns[i] }, cell)));
    const load = async () => {
      try {
        const reply = await api("/api/v1/contributors");
        const userList = reply.users || [];
        const machineList = reply.machines || [];
        note.textContent = `${userList.length} users, ${machineList.length} machines; summed ${ago(Number(reply.as_of_ms))}`;
        users.replaceChildren(...userList.map((u) =>
          row({ "data-user": u.user }, userColumns,
            [el("a", { href: `/users/${encodeURIComponent(u.user)}` }, u.user), String(u.machines || 0), ...creditCells(u.credit)])));
        machines.replaceChildren(...machineList.map((m) =>
          row({ "data-worker-id": m.worker_id }, machineColumns, [String(m.worker_id), m.name || "–", m.user || "–", ...creditCells(m.credit)])));
      } catch (error) {
        showError(error, users);
      }
    };
    await load();
    const timer = setInterval(() => (document.body.contains(users) ? load() : clearInterval(timer)), 15000);
  }

  // ---- Nets -------------------------------------------------------------------------

  async function netsPage() {
    document.title = "Nets · xq cluster";
    const params = new URLSearchParams(location.search);
    const lineage = el("input", { id: "lineage", type: "search", value: params.get("lineage") || "", placeholder: "all" });
    const body = el("tbody");
    const count = el("p", { class: "count", role: "status" });
    const columns = ["#", "Lineage", "Generation", "Parent", "State", "Test", "Data", "Positions", "Epochs", "Train loss", "Validation loss", "Created"];
    // A named lineage's generation in progress, before its net exists: the running jobs
    // xq-trainer's loop made for the lineage (its self-play and its test).
    const runningBody = el("tbody");
    const running = el("section", { id: "lineage-running", hidden: true },
      el("h2", {}, "In progress"),
      el("table", { id: "lineage-jobs", class: "cards" },
        el("thead", {}, el("tr", {}, TEST_COLUMNS.map((c) => el("th", { scope: "col" }, c)))), runningBody));
    main.replaceChildren(el("h1", {}, "Nets"),
      el("p", { class: "note" }, "Nets recorded by xq-trainer's loop: each trained on self-play of its parent and promoted when its test accepts H1; a lineage's generation 0, when it has one, is its seed, a net trained elsewhere."),
      el("form", { class: "filters", role: "search", onsubmit: (event) => event.preventDefault() },
        el("label", { for: "lineage" }, "Lineage", lineage)),
      running,
      count,
      el("table", { id: "nets", class: "cards" },
        el("thead", {}, el("tr", {}, columns.map((c) => el("th", { scope: "col" }, c)))), body));
    // Loads overlap (the refresh timer, a name typed): only the newest one's replies show.
    let latest = 0;
    const load = async () => {
      const asked = ++latest;
      const name = lineage.value.trim();
      history.replaceState(null, "", name ? `/nets?lineage=${encodeURIComponent(name)}` : "/nets");
      const runningJobs = name
        ? api(`/api/v1/jobs?state=running&lineage=${encodeURIComponent(name)}`).then((reply) => reply.jobs || [], () => [])
        : Promise.resolve([]);
      try {
        const reply = await api(`/api/v1/nets${name ? "?lineage=" + encodeURIComponent(name) : ""}`);
        const jobs = await runningJobs;
        if (asked !== latest) return;
        runningBody.replaceChildren(...jobs.map(testRow));
        running.hidden = jobs.length === 0;
        const nets = reply.nets || [];
        count.textContent = nets.length === 1 ? "1 net" : `${nets.length} nets`;
        body.replaceChildren(...nets.map((net) => {
          const cells = [
            String(net.net_id), net.lineage, String(net.generation),
            net.generation === 0 ? "–" : net.parent_id ? `#${net.parent_id}` : "handcrafted",
            el("span", { class: `state state-${net.state}` }, net.state),
            net.test_job_id ? el("a", { href: `/tests/${net.test_job_id}` }, `#${net.test_job_id}`) : "–",
            net.data_job_id ? el("a", { href: `/tests/${net.data_job_id}` }, `#${net.data_job_id}`) : "–",
            Number(net.positions).toLocaleString(), String(net.epochs),
            fixed(net.train_loss, 5), fixed(net.validation_loss, 5), when(Number(net.created_ms)),
          ];
          return el("tr", { "data-net-id": net.net_id }, cells.map((cell, i) => el("td", { "data-label": columns[i] }, cell)));
        }));
      } catch (error) {
        if (asked !== latest) return;
        count.textContent = "";
        showError(error, body);
      }
    };
    let typing = null;
    lineage.addEventListener("input", () => {
      clearTimeout(typing);
      typing = setTimeout(load, 250);
    });
    await load();
    // A lineage grows as its loop runs: a job's progress, a new net, a verdict.
    const timer = setInterval(() => (document.body.contains(body) ? load() : clearInterval(timer)), 15000);
  }

  // ---- The SPRT calculator -----------------------------------------------------------

  async function sprtPage() {
    document.title = "SPRT calculator · xq cluster";
    const params = new URLSearchParams(location.search);
    const field = (name, label, value, attributes = {}) => {
      const input = el("input", { id: `sprt-${name}`, name, value: params.get(name) || value, inputmode: "decimal", ...attributes });
      return el("label", { for: `sprt-${name}` }, label, input);
    };
    const model = el("select", { id: "sprt-model", name: "model" },
      el("option", { value: "normalized" }, "normalized Elo"), el("option", { value: "logistic" }, "logistic Elo"));
    model.value = params.get("model") === "logistic" ? "logistic" : "normalized";
    const kind = el("select", { id: "sprt-kind", name: "kind" },
      el("option", { value: "penta" }, "pentanomial (pairs scoring 0, ½, 1, 1½, 2)"),
      el("option", { value: "trinomial" }, "trinomial (losses, draws, wins)"));
    kind.value = params.has("trinomial") ? "trinomial" : "penta";
    const counts = field("counts", "Counts, comma-separated", params.get("penta") || params.get("trinomial") || "", {
      placeholder: "e.g. 10,120,300,130,12", inputmode: "numeric",
    });
    const result = el("div", { id: "sprt-result", role: "status", "aria-live": "polite" },
      el("p", {}, "Enter counts to see the LLR, its bounds and the Elo."));
    const form = el("form", { class: "sprt", id: "sprt-form" },
      field("elo0", "Elo0 (H0)", "0"), field("elo1", "Elo1 (H1)", "2"),
      field("alpha", "α", "0.05"), field("beta", "β", "0.05"),
      el("label", { for: "sprt-model" }, "Model", model),
      el("label", { for: "sprt-kind" }, "Counts of", kind),
      counts, el("button", { type: "submit" }, "Compute"));
    main.replaceChildren(el("h1", {}, "SPRT calculator"),
      el("p", { class: "note" }, "The same code as the coordinator's tests: the log-likelihood ratio of H1 against H0 ",
        "and the bounds at which a test stops."), form, result);
    const compute = async () => {
      const data = new FormData(form);
      const query = new URLSearchParams();
      for (const name of ["elo0", "elo1", "alpha", "beta", "model"]) query.set(name, String(data.get(name)).trim());
      query.set(data.get("kind"), String(data.get("counts")).replace(/\s+/g, ""));
      history.replaceState(null, "", `/sprt?${query}`);
      try {
        const answer = await api(`/api/v1/sprt?${query}`);
        const verdict = answer.llr >= answer.upper ? "H1 accepted" : answer.llr <= answer.lower ? "H0 accepted" : "continue";
        const entries = [
          ["LLR", fixed(answer.llr, 2), "sprt-llr"],
          ["Bounds", `${fixed(answer.lower, 2)} … ${fixed(answer.upper, 2)}`, "sprt-bounds"],
          ["Verdict", verdict, "sprt-verdict"],
          ["Elo [95%]", eloText(answer.elo), "sprt-elo"],
        ];
        if (answer.elo) entries.push(["LOS", `${fixed(answer.elo.los * 100, 1)}%`], ["nElo", signed(answer.elo.nelo, 1)]);
        result.replaceChildren(definitionList(entries));
      } catch (error) {
        result.replaceChildren(el("p", { class: "error", role: "alert" }, error.message));
      }
    };
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      compute();
    });
    if (params.has("penta") || params.has("trinomial")) await compute();
  }

  // ---- Tournaments -------------------------------------------------------------------

  async function tournamentsPage() {
    document.title = "Tournaments · xq cluster";
    const body = el("tbody");
    const count = el("p", { class: "count", role: "status" });
    const columns = ["#", "System", "State", "Engines", "Leader", "Pairings", "Description", "Created"];
    main.replaceChildren(el("h1", {}, "Tournaments"),
      el("p", { class: "note" }, "Events made by xq tournament: each pairing a test of its own, placed by Articles 9 and 10 of the World Xiangqi Rules."),
      count,
      el("table", { id: "tournaments", class: "cards" },
        el("thead", {}, el("tr", {}, columns.map((c) => el("th", { scope: "col" }, c)))), body));
    const load = async () => {
      let reply;
      try {
        reply = await api("/api/v1/tournaments");
      } catch (error) {
        count.textContent = "";
        showError(error, body);
        return;
      }
      const tournaments = reply.tournaments || [];
      count.textContent = tournaments.length === 1 ? "1 tournament" : `${tournaments.length} tournaments`;
      body.replaceChildren(...tournaments.map((t) => {
        const standings = t.standings || [];
        const leader = standings.length ? `${standings[0].engine} (${standings[0].points})` : "–";
        const cells = [
          el("a", { href: `/tournaments/${t.tournament_id}` }, `#${t.tournament_id}`), t.system,
          el("span", { class: `state state-${t.state}` }, t.state), String(standings.length), leader,
          String((t.pairings || []).length), t.description || "", when(Number(t.created_ms)),
        ];
        return el("tr", { "data-tournament-id": t.tournament_id }, cells.map((cell, i) => el("td", { "data-label": columns[i] }, cell)));
      }));
    };
    await load();
    live.follow(throttled(load, 2000), load);
  }

  // ---- A tournament ------------------------------------------------------------------

  async function tournamentPage(id) {
    document.title = `Tournament ${id} · xq cluster`;
    const heading = el("h1", {}, `Tournament #${id}`);
    const summary = el("p", { id: "tournament-summary" });
    const standings = el("tbody");
    const pairings = el("tbody");
    main.replaceChildren(heading, summary,
      el("p", {}, el("a", { href: `/api/v1/tournaments/${id}/games.pgn`, download: `tournament-${id}.pgn`, id: "event-pgn" },
        "Download every game of the event (PGN)")),
      el("section", { "aria-labelledby": "standings-title" },
        el("h2", { id: "standings-title" }, "Standings"),
        el("p", { class: "note", id: "placing-note" }),
        el("table", { class: "cards", id: "standings" },
          el("thead", {}, el("tr", {}, ["#", "Engine", "Points", "Games", "W-D-L", "Elo"].map((c) => el("th", { scope: "col" }, c)),
            el("th", { scope: "col", id: "tie-break" }, "Neustadtl"))),
          standings)),
      el("section", { "aria-labelledby": "pairings-title" },
        el("h2", { id: "pairings-title" }, "Pairings"),
        el("table", { class: "cards", id: "pairings" },
          el("thead", {}, el("tr", {}, ["Round", "Pairing", "Score", "Pairs", "Test"].map((c) => el("th", { scope: "col" }, c)))),
          pairings)));
    let tests = new Set();
    const load = async () => {
      let t;
      try {
        t = await api(`/api/v1/tournaments/${id}`);
      } catch (error) {
        showError(error);
        return;
      }
      tests = new Set((t.pairings || []).map((p) => Number(p.job_id)));
      const prior = t.rating_prior_draws > 0
        ? `; Elo with ${t.rating_prior_draws} virtual draw(s) between every pair that met, as an engine won or lost every game`
        : "";
      summary.textContent = `${t.state}: ${t.system}, ${t.points} points a game${t.description ? `, ${t.description}` : ""}${prior}`;
      const labels = ["#", "Engine", "Points", "Games", "W-D-L", "Elo", t.system === "swiss" ? "Solkoff" : "Neustadtl"];
      document.getElementById("tie-break").textContent = labels[6];
      document.getElementById("placing-note").textContent = t.system === "swiss"
        ? "Placed by points (Article 9), byes a win's points for each game of a round, then the Solkoff score, the "
          + "direct encounter, wins, wins with Black and games with Black (Article 10.3); Elo by maximum likelihood over the event's games."
        : "Placed by points (Article 9), then the Neustadtl score, the direct encounter, wins, wins with Black and "
          + "games with Black (Article 10.2); Elo by maximum likelihood over the event's games.";
      standings.replaceChildren(...(t.standings || []).map((s) => el("tr", { "data-engine": s.engine },
        [String(s.place), s.engine, String(s.points), String(s.games), `${s.wins}-${s.draws}-${s.losses}`,
          s.elo_error > 0 ? `${signed(s.elo, 0)} ± ${fixed(s.elo_error, 0)}` : "–",
          fixed((s.tie_breaks || {})[t.system === "swiss" ? "10.3.A" : "10.2.A"] || 0, 1)].map((c, i) => el("td", { "data-label": labels[i] }, c)))));
      pairings.replaceChildren(...(t.pairings || []).map((p) => el("tr", {},
        el("td", { "data-label": "Round" }, String(p.round || "–")),
        el("td", { "data-label": "Pairing" }, `${p.first} – ${p.second}`),
        el("td", { "data-label": "Score" }, `${p.first_points} – ${p.second_points}`),
        el("td", { "data-label": "Pairs" }, `${p.pairs_done} of ${p.pairs_total}`),
        el("td", { "data-label": "Test" }, el("a", { href: `/tests/${p.job_id}` }, `#${p.job_id}`)))));
    };
    await load();
    const reload = throttled(load, 1000);
    // The standings move when one of the tournament's tests counts a pair.
    live.follow((jobs) => {
      if (jobs.some((job) => tests.has(Number(job.job_id)))) reload();
    }, reload);
  }

  // ---- Routing -----------------------------------------------------------------------

  function route() {
    document.onkeydown = null;
    const path = location.pathname.replace(/\/+$/, "") || "/";
    let match;
    if (path === "/") return testsPage();
    if ((match = /^\/tests\/(\d+)$/.exec(path))) return testPage(match[1]);
    if ((match = /^\/tests\/(\d+)\/pairs\/(\d+)$/.exec(path))) return viewerPage(match[1], match[2]);
    if (path === "/workers") return workersPage();
    if (path === "/contributors") return contributorsPage();
    if (path === "/login") return loginPage();
    if (path === "/signup") return signupPage();
    if ((match = /^\/users\/([^/]+)$/.exec(path))) return userPage(decodeURIComponent(match[1]));
    if (path === "/sprt") return sprtPage();
    if (path === "/nets") return netsPage();
    if (path === "/tournaments") return tournamentsPage();
    if ((match = /^\/tournaments\/(\d+)$/.exec(path))) return tournamentPage(match[1]);
    main.replaceChildren(el("p", { class: "error" }, `Nothing at ${path}.`));
    return undefined;
  }

  loadSession().then(route);
})();
