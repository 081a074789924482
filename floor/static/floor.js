// shoewarden floor and dealer display: live updates over Server-Sent Events.
// No library, no build step: on an event, fetch the fragment the server renders with the
// same template as the page, and swap it in.
(function () {
  "use strict";
  var body = document.body;
  var table = body.dataset.table || null;
  var status = document.getElementById("stream");
  var targets = Array.prototype.slice.call(document.querySelectorAll("[data-fragment]"));
  var timer = null;
  var busy = false;
  var again = false;

  function setStatus(state, text) {
    if (!status) return;
    status.dataset.state = state;
    status.textContent = text;
  }

  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    Promise.all(targets.map(function (el) {
      // keep what the person is typing into a note field across the swap
      var notes = {};
      el.querySelectorAll("input.ack-note").forEach(function (i) { notes[i.dataset.noteFor] = i.value; });
      return fetch(el.dataset.fragment, {cache: "no-store"}).then(function (r) {
        return r.ok ? r.text() : null;
      }).then(function (html) {
        if (html === null) return;
        el.innerHTML = html;
        el.querySelectorAll("input.ack-note").forEach(function (i) {
          if (notes[i.dataset.noteFor]) i.value = notes[i.dataset.noteFor];
        });
      });
    })).catch(function () {}).then(function () {
      busy = false;
      body.dataset.refreshed = String(Date.now());
      if (again) { again = false; schedule(0); }
    });
  }

  function schedule(delay) {
    if (timer !== null) return;
    timer = setTimeout(function () { timer = null; refresh(); }, delay);
  }

  var source = new EventSource(body.dataset.events);
  source.onopen = function () { setStatus("live", "live"); };
  source.onerror = function () { setStatus("down", "reconnecting…"); };
  source.addEventListener("table", function (e) {
    var data = JSON.parse(e.data);
    if (table && data.table !== table) return;
    schedule(table ? 30 : 200);
  });
  ["alert", "ack"].forEach(function (kind) {
    source.addEventListener(kind, function (e) {
      var data = JSON.parse(e.data);
      if (table && data.alert && data.alert.table !== table) return;
      schedule(0);
    });
  });

  document.addEventListener("click", function (ev) {
    var button = ev.target.closest ? ev.target.closest("button[data-ack]") : null;
    if (!button) return;
    var id = button.dataset.ack;
    var who = document.getElementById("ack-by");
    var note = document.querySelector('input.ack-note[data-note-for="' + id + '"]');
    var by = who ? who.value.trim() : "";
    if (!by) { if (who) { who.focus(); who.classList.add("missing"); } return; }
    button.disabled = true;
    fetch("/api/alerts/" + id + "/ack", {
      method: "POST", headers: {"Content-Type": "application/json"},
      body: JSON.stringify({by: by, note: note ? note.value : ""})
    }).then(function (r) {
      return r.json().then(function (d) { if (!r.ok) window.alert(d.error || "not acknowledged"); });
    }).then(function () { schedule(0); });
  });

  var lookup = document.getElementById("lookup");
  if (lookup) {
    lookup.addEventListener("submit", function (ev) {
      ev.preventDefault();
      var params = new URLSearchParams();
      ["day", "shoe", "round"].forEach(function (k) {
        var v = lookup.elements[k].value.trim();
        if (v) params.set(k, v);
      });
      var out = document.getElementById("lookup-result");
      fetch("/api/tables/" + encodeURIComponent(lookup.dataset.table) + "/rounds?" + params)
        .then(function (r) { return r.json(); })
        .then(function (d) {
          if (d.error) { out.textContent = d.error; return; }
          if (!d.length) { out.textContent = "no such round"; return; }
          out.textContent = d.map(function (r) { return r.layout.join("\n"); }).join("\n\n");
        });
    });
  }
})();
