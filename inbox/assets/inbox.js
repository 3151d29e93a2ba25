// The inbox's small script: live updates from the server's event stream,
// suggestion chips, times in the reader's time zone, and the edit form's
// check with a diff of the edited arguments.
// The pages work without it (reload to see changes).
(function () {
  "use strict";

  // Live regions: an element with data-stream and data-partial is
  // refreshed from data-partial whenever the stream says a run changed.
  document.querySelectorAll("[data-stream][data-partial]").forEach(function (el) {
    if (!window.EventSource) return;
    var busy = false, again = false;
    function refresh() {
      if (busy) { again = true; return; }
      busy = true;
      fetch(el.dataset.partial, { credentials: "same-origin", headers: { Accept: "text/html" } })
        .then(function (r) { return r.ok ? r.text() : null; })
        .then(function (html) { if (html !== null) el.innerHTML = html; })
        .catch(function () {})
        .then(function () { busy = false; if (again) { again = false; refresh(); } });
    }
    var src = new EventSource(el.dataset.stream);
    src.onmessage = function (m) {
      refresh();
      var box = document.querySelector("[data-request]");
      var changed = document.getElementById("changed");
      if (!box || !changed) return;
      try {
        var c = JSON.parse(m.data);
        if (c.kind !== "interrupted" || c.requestId !== box.dataset.request) changed.hidden = false;
      } catch (e) { changed.hidden = false; }
    };
    window.addEventListener("pagehide", function () { src.close(); });
    // Deadlines and ages move on even when nothing happens.
    setInterval(refresh, 30000);
  });

  // Suggestion chips fill their question's field.
  document.addEventListener("click", function (e) {
    var b = e.target.closest("[data-fill]");
    if (!b) return;
    var input = document.getElementById(b.dataset.fill);
    if (input) { input.value = b.dataset.value; input.focus(); }
  });

  // Times: each <time data-local> is written in UTC by the server and
  // shown here in the reader's own time zone, the UTC text kept as its
  // title.
  function localTimes(root) {
    root.querySelectorAll("time[data-local]").forEach(function (t) {
      var d = new Date(t.getAttribute("datetime"));
      if (isNaN(d)) return;
      if (!t.title) t.title = t.textContent;
      t.textContent = d.toLocaleString([], { dateStyle: "medium", timeStyle: "short" });
    });
  }
  localTimes(document);
  new MutationObserver(function (ms) {
    ms.forEach(function (m) { m.addedNodes.forEach(function (n) { if (n.querySelectorAll) localTimes(n); }); });
  }).observe(document.body, { childList: true, subtree: true });

  // The edit form: one field per argument. Mark the fields changed from
  // the proposal, check JSON fields as they are typed, and list the
  // edits.
  var form = document.querySelector("form[data-edit]");
  if (form) {
    var out = document.getElementById("args-diff");
    var fields = form.querySelectorAll("[data-was]");
    var valueOf = function (f) { return f.type === "checkbox" ? String(f.checked) : f.value; };
    var same = function (f) {
      var a = valueOf(f), b = f.dataset.was;
      if (f.hasAttribute("data-json") || f.tagName === "SELECT") {
        try { return JSON.stringify(JSON.parse(a)) === JSON.stringify(JSON.parse(b)); } catch (e) { return false; }
      }
      if (f.type === "number" && a !== "" && b !== "") return Number(a) === Number(b);
      return a === b;
    };
    var label = function (f) {
      var l = form.querySelector('label[for="' + f.id + '"]');
      return l ? l.textContent.trim() : f.name;
    };
    var shown = function (f, v) {
      if (f.tagName === "SELECT") {
        for (var i = 0; i < f.options.length; i++) if (f.options[i].value === v) return f.options[i].textContent;
      }
      if (f.type === "checkbox") return v === "true" ? "yes" : "no";
      return v;
    };
    var check = function () {
      var rows = [];
      fields.forEach(function (f) {
        var err = document.getElementById(f.id + "-error");
        if (f.hasAttribute("data-json")) {
          try { JSON.parse(f.value); f.setCustomValidity(""); if (err && err.dataset.live) { err.hidden = true; err.textContent = ""; } f.removeAttribute("aria-invalid"); }
          catch (e) {
            f.setCustomValidity("Not valid JSON: " + e.message);
            f.setAttribute("aria-invalid", "true");
            if (err) { err.dataset.live = "1"; err.textContent = "Not valid JSON: " + e.message; err.hidden = false; }
          }
        }
        var changed = !same(f);
        f.classList.toggle("changed-field", changed);
        if (changed) rows.push([label(f), shown(f, f.dataset.was), shown(f, valueOf(f))]);
      });
      out.textContent = "";
      if (!rows.length) return;
      var t = document.createElement("table");
      t.className = "diff";
      t.innerHTML = "<caption>Your edits</caption><thead><tr><th scope=col>Argument</th><th scope=col>Proposed</th><th scope=col>Edited</th></tr></thead>";
      var body = document.createElement("tbody");
      rows.forEach(function (r) {
        var tr = document.createElement("tr");
        var th = document.createElement("th"); th.scope = "row"; th.textContent = r[0];
        var d1 = document.createElement("td"), del = document.createElement("del"); del.textContent = r[1]; d1.appendChild(del);
        var d2 = document.createElement("td"), ins = document.createElement("ins"); ins.textContent = r[2]; d2.appendChild(ins);
        tr.append(th, d1, d2); body.appendChild(tr);
      });
      t.appendChild(body);
      out.appendChild(t);
    };
    form.addEventListener("input", check);
    form.addEventListener("change", check);
    check();
  }
})();

// Web Push: a person signed in subscribes the browser they are in to the
// approvals that wait on them. The button shows where the browser can.
(function () {
  "use strict";
  var b = document.getElementById("push");
  var status = document.getElementById("push-status");
  if (!b || !("serviceWorker" in navigator) || !("PushManager" in window) || !("Notification" in window)) return;
  b.hidden = false;
  function say(text) { if (status) status.textContent = text; }
  function keyBytes(s) {
    var raw = atob((s + "===".slice((s.length + 3) % 4)).replace(/-/g, "+").replace(/_/g, "/"));
    var out = new Uint8Array(raw.length);
    for (var i = 0; i < raw.length; i++) out[i] = raw.charCodeAt(i);
    return out;
  }
  b.addEventListener("click", function () {
    say("Asking the browser…");
    Notification.requestPermission().then(function (perm) {
      if (perm !== "granted") throw new Error("notifications are not allowed in this browser");
      return navigator.serviceWorker.register("/sw.js", { scope: "/" });
    }).then(function () {
      return navigator.serviceWorker.ready;
    }).then(function (reg) {
      return reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: keyBytes(b.dataset.key) });
    }).then(function (sub) {
      var body = new URLSearchParams({ csrf: b.dataset.csrf, subscription: JSON.stringify(sub) });
      return fetch("/push", { method: "POST", body: body, credentials: "same-origin" });
    }).then(function (r) {
      if (!r.ok) return r.text().then(function (t) { throw new Error(t); });
      say("This device will be notified.");
    }).catch(function (e) {
      say("Not subscribed: " + e.message);
    });
  });
})();

// A wide screen shows the conversation beside the decision, open; a
// phone keeps it folded above the actions.
(function () {
  if (!window.matchMedia || !window.matchMedia("(min-width: 64rem)").matches) return;
  document.querySelectorAll("details[data-open-wide]").forEach(function (d) { d.open = true; });
})();

// The queue's filters apply as they change, without their button: a
// select at once, the search once typing pauses.
(function () {
  var form = document.querySelector("form.filters[data-auto]");
  if (!form) return;
  var button = form.querySelector("button.apply");
  if (button) button.hidden = true;
  var timer;
  form.querySelectorAll("select").forEach(function (s) {
    s.addEventListener("change", function () { form.requestSubmit ? form.requestSubmit() : form.submit(); });
  });
  var q = form.querySelector("input[name=q]");
  if (q) q.addEventListener("input", function () {
    clearTimeout(timer);
    timer = setTimeout(function () { form.requestSubmit ? form.requestSubmit() : form.submit(); }, 400);
  });
})();

// Several at once: the queue's checked rows are the bulk form's
// selection. A row the live list redraws stays checked while it is the
// same request at the same version; one that changed is kept in the
// form as it was shown, so that the server leaves it out and says so.
(function () {
  var form = document.getElementById("bulk");
  if (!form) return;
  var chosen = new Set();
  var count = document.getElementById("bulk-count");
  var first = count.textContent;
  var buttons = form.querySelectorAll("button[name=decision]");
  function sync() {
    form.querySelectorAll("input[type=hidden][name=item]").forEach(function (h) { h.remove(); });
    var shown = new Set();
    document.querySelectorAll("input.pick").forEach(function (c) {
      c.checked = chosen.has(c.value);
      if (c.checked) shown.add(c.value);
    });
    chosen.forEach(function (v) {
      if (shown.has(v)) return;
      var h = document.createElement("input");
      h.type = "hidden"; h.name = "item"; h.value = v;
      form.appendChild(h);
    });
    count.textContent = chosen.size ? chosen.size + " selected: approve or reject them together, each as a decision of your own." : first;
    buttons.forEach(function (b) { b.disabled = chosen.size === 0; });
  }
  document.addEventListener("change", function (e) {
    if (!e.target.matches || !e.target.matches("input.pick")) return;
    if (e.target.checked) chosen.add(e.target.value); else chosen.delete(e.target.value);
    sync();
  });
  var queue = document.getElementById("queue");
  if (queue) new MutationObserver(sync).observe(queue, { childList: true });
  sync();
})();

// Keys: in the queue j and k move between rows, o opens, x selects, /
// searches; on a request's page a and r go to Approve and Reject (Enter
// then sends), e to the edit form. Never while typing.
(function () {
  function typing(t) { return t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName)); }
  document.addEventListener("keydown", function (e) {
    if (e.ctrlKey || e.metaKey || e.altKey || typing(e.target)) return;
    var rows = Array.prototype.slice.call(document.querySelectorAll("#queue .item"));
    var at = rows.findIndex(function (r) { return r.contains(document.activeElement); });
    function go(i) {
      var row = rows[Math.max(0, Math.min(rows.length - 1, i))];
      if (row) row.querySelector("a.row-title").focus();
    }
    var el;
    switch (e.key) {
      case "j": if (rows.length) { go(at + 1); e.preventDefault(); } return;
      case "k": if (rows.length) { go(at < 0 ? 0 : at - 1); e.preventDefault(); } return;
      case "o": if (at >= 0) { rows[at].querySelector("a.row-title").click(); e.preventDefault(); } return;
      case "x":
        el = at >= 0 && rows[at].querySelector("input.pick");
        if (el) { el.checked = !el.checked; el.dispatchEvent(new Event("change", { bubbles: true })); e.preventDefault(); }
        return;
      case "/": el = document.getElementById("q"); if (el) { el.focus(); e.preventDefault(); } return;
      case "a": el = document.querySelector(".decisions button.approve"); break;
      case "r": el = document.querySelector("#reason-reject"); break;
      case "e": el = document.querySelector("form.edit input, form.edit select, form.edit textarea"); break;
      default: return;
    }
    if (el) { el.focus(); e.preventDefault(); }
  });
})();
