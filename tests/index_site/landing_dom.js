// Runs the landing page's chooser script under node with a minimal DOM (the Chromium tests need a
// browser; this needs only node). Usage: node landing_dom.js PAGE.html HASH
// The page is taken as opened from a file:// URL with location.hash = HASH (the chooser then keeps its
// choice in the hash). Prints JSON: the command texts, the notice and the selected values after init().
"use strict";
const fs = require("fs");
const html = fs.readFileSync(process.argv[2], "utf8");
const hash = process.argv[3] || "";
const data = html.split('<script id="site-data" type="application/json">')[1].split("</script>")[0];
const scripts = html.split("<script>");
const code = scripts[scripts.length - 1].split("</script>")[0];

function element(id) {
  return {
    id, textContent: "", className: "", hidden: false, value: "", options: [], selectedIndex: -1, listeners: {},
    appendChild(o) {
      this.options.push(o);
      if (this.selectedIndex < 0) { this.selectedIndex = 0; this.value = o.value; }
    },
    addEventListener(ev, fn) { this.listeners[ev] = fn; },
    getAttribute() { return null; },
  };
}
const els = {};
for (const id of ["os", "torch", "accel", "status", "notice", "pip-note", "pip-command", "uv-command", "uv-project",
                  "uv-project-block"]) els[id] = element(id);
els["site-data"] = { textContent: data };
// value setter keeps selectedIndex in step, as a <select> does
for (const id of ["os", "torch", "accel"]) {
  const el = els[id];
  let v = "";
  Object.defineProperty(el, "value", {
    get() { return v; },
    set(x) { v = x; const i = el.options.findIndex((o) => o.value === x); if (i >= 0) el.selectedIndex = i; },
  });
  Object.defineProperty(el, "textContent", {
    get() { return ""; },
    set(x) { if (x === "") { el.options = []; el.selectedIndex = -1; v = ""; } },
  });
}
global.document = {
  getElementById: (id) => els[id],
  createElement: () => ({ value: "", textContent: "" }),
  querySelectorAll: () => [],
};
global.location = { hash, search: "", protocol: "file:", pathname: "/site/index.html" };
global.history = { replaceState: (_a, _b, h) => { global.location.hash = h; } };
global.window = { addEventListener() {} };
eval(code);
const out = {};
for (const id of ["status", "notice", "pip-note", "pip-command", "uv-command", "uv-project"]) out[id] = els[id].textContent;
out.notice_hidden = els.notice.hidden;
out.os = els.os.value;
out.hash = global.location.hash;
out.torch = els.torch.value;
out.accel = els.accel.value;
out.torch_options = els.torch.options.map((o) => o.textContent);
console.log(JSON.stringify(out));
