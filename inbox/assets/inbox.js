// The inbox's small script: live updates from the server's event stream,
// suggestion chips, and a JSON check with a diff for edited arguments.
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

  // Edited arguments: check the JSON as it is typed, and show what
  // differs from the proposal.
  var args = document.getElementById("args");
  if (args) {
    var err = document.getElementById("args-error");
    var out = document.getElementById("args-diff");
    var proposal = {};
    try { proposal = JSON.parse(args.dataset.proposal || "{}"); } catch (e) {}
    var check = function () {
      var v;
      try {
        v = JSON.parse(args.value);
        if (v === null || typeof v !== "object" || Array.isArray(v)) throw new Error("the arguments must be a JSON object");
      } catch (e) {
        args.setCustomValidity("Not valid JSON: " + e.message);
        args.setAttribute("aria-invalid", "true");
        err.textContent = "Not valid JSON: " + e.message;
        err.hidden = false;
        out.textContent = "";
        return;
      }
      args.setCustomValidity("");
      args.removeAttribute("aria-invalid");
      err.hidden = true;
      var rows = [];
      Object.keys(Object.assign({}, proposal, v)).sort().forEach(function (k) {
        var a = JSON.stringify(proposal[k]), b = JSON.stringify(v[k]);
        if (a !== b) rows.push([k, a === undefined ? "(none)" : a, b === undefined ? "(removed)" : b]);
      });
      out.textContent = "";
      if (!rows.length) { out.textContent = "No change from the proposal."; return; }
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
    args.addEventListener("input", check);
  }
})();
