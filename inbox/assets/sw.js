// The inbox's service worker: it shows the Web Push notices of the
// approvals that wait on the person who subscribed this browser, and
// answers their actions. Approve decides through the person's own
// single-use decision link, as the link of a mail does; Reject, and a
// click on the notice, open the link's page (a reject may need a reason).
"use strict";

self.addEventListener("install", function () { self.skipWaiting(); });
self.addEventListener("activate", function (e) { e.waitUntil(self.clients.claim()); });

// sameOrigin reports whether url is on the inbox's own origin: the
// worker opens and posts to nothing else.
function sameOrigin(url) {
  try { return new URL(url).origin === self.location.origin; } catch (e) { return false; }
}

self.addEventListener("push", function (event) {
  var p = {};
  try { p = event.data ? event.data.json() : {}; } catch (e) { p = {}; }
  var url = sameOrigin(p.url) ? p.url : "/";
  // A follow-up (settled) replaces the notice that asked, quietly and
  // without buttons: what it asked was decided.
  var settled = p.settled === true;
  event.waitUntil(self.registration.showNotification(p.title || "Interlock", {
    body: p.body || "",
    tag: p.tag || undefined,
    renotify: !!p.tag && !settled,
    silent: settled,
    requireInteraction: !settled,
    actions: !settled && Array.isArray(p.actions) ? p.actions.slice(0, 2) : [],
    data: { url: url, csrf: settled ? "" : p.csrf || "" }
  }));
});

// decide posts an approve to the notice's decision link.
function decide(n) {
  var key = "inbox-";
  var b = new Uint8Array(12);
  self.crypto.getRandomValues(b);
  b.forEach(function (x) { key += (x < 16 ? "0" : "") + x.toString(16); });
  var body = new URLSearchParams({ csrf: n.data.csrf, decision: "approve", key: key });
  return fetch(n.data.url, { method: "POST", body: body, credentials: "omit", redirect: "error" })
    .then(function (r) {
      if (!r.ok) throw new Error("the decision was not taken: " + r.status);
      return self.registration.showNotification("Approved", { body: n.title, tag: n.tag || undefined });
    });
}

// act answers a notice as a click on it (action "") or on one of its
// buttons does.
function act(n, action) {
  n.close();
  var d = n.data || {};
  if (action === "approve" && d.csrf && sameOrigin(d.url)) {
    // Should the decision not be taken (the link used, the request
    // settled), the page says what became of it.
    return decide(n).catch(function () { return self.clients.openWindow(d.url); });
  }
  if (d.url && sameOrigin(d.url)) return self.clients.openWindow(d.url);
  return Promise.resolve();
}

self.addEventListener("notificationclick", function (event) {
  event.waitUntil(act(event.notification, event.action));
});

// A page of the inbox may answer a notice shown on this device as its
// buttons do: {act: "approve" or "", tag}.
self.addEventListener("message", function (event) {
  var m = event.data || {};
  if (typeof m.tag !== "string" || (m.act !== "approve" && m.act !== "")) return;
  event.waitUntil(self.registration.getNotifications({ tag: m.tag }).then(function (ns) {
    // Approve acts on a notice that asks, never on a follow-up.
    ns = ns.filter(function (n) { return m.act !== "approve" || (n.data && n.data.csrf); });
    return Promise.all(ns.map(function (n) { return act(n, m.act); }));
  }));
});
