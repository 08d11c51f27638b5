/**
 * The frame every page shares: its Content-Security-Policy (nothing loads from anywhere, and the
 * only script and style that run are pipe's own, by nonce), the stylesheet, and the header.
 */
import {html, trusted, type Html} from './html.js'

/** The policy a page is served with (and carries in a meta tag, for the exported file). */
export function contentSecurityPolicy(nonce: string, live: boolean, meta = false): string {
  const policy = [
    "default-src 'none'",
    `style-src 'nonce-${nonce}'`,
    `script-src 'nonce-${nonce}'`,
    "img-src 'self' data:",
    live ? "connect-src 'self'" : "connect-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
  ]
  // A browser ignores frame-ancestors in a meta tag (and says so on the console): the header carries it.
  return (meta ? policy : [...policy, "frame-ancestors 'none'"]).join('; ')
}

const STYLE = `
:root { color-scheme: light dark; --fg:#1d232b; --muted:#5b6673; --bg:#ffffff; --panel:#f5f7fa; --line:#d8dee6; --accent:#2f6fdb;
  --ok:#1a7f37; --fail:#cf222e; --wait:#9a6700; --stop:#8250df; --mono: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
@media (prefers-color-scheme: dark) { :root { --fg:#e6edf3; --muted:#9aa7b4; --bg:#0d1117; --panel:#161b22; --line:#30363d; --accent:#58a6ff; } }
* { box-sizing: border-box; }
body { margin:0; font: 14px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color:var(--fg); background:var(--bg); }
header.top { display:flex; gap:1.5rem; align-items:baseline; padding:.7rem 1.5rem; border-bottom:1px solid var(--line); background:var(--panel); }
header.top a { color:var(--fg); text-decoration:none; font-weight:600; }
header.top .brand { font-family:var(--mono); font-size:1.1rem; }
main { padding:1rem 1.5rem 3rem; max-width:1400px; }
h1 { font-size:1.35rem; margin:.2rem 0 .8rem; } h2 { font-size:1.1rem; margin:1.6rem 0 .6rem; border-bottom:1px solid var(--line); padding-bottom:.2rem; }
h3 { font-size:1rem; margin:.4rem 0; } .stats h3 { margin-top:1.4rem; }
a { color:var(--accent); }
table { border-collapse:collapse; width:100%; } th, td { text-align:left; padding:.3rem .5rem; border-bottom:1px solid var(--line); vertical-align:top; }
th { color:var(--muted); font-weight:600; font-size:.85rem; }
tr.child td:first-child { padding-left:1.6rem; } tr.grandchild td:first-child { padding-left:3rem; }
code, pre, .mono { font-family:var(--mono); font-size:12.5px; }
pre { background:var(--panel); border:1px solid var(--line); border-radius:6px; padding:.6rem .8rem; overflow:auto; max-height:32rem; white-space:pre-wrap; word-break:break-word; }
dl.facts { display:grid; grid-template-columns: max-content 1fr; gap:.2rem 1rem; margin:0; } dl.facts dt { color:var(--muted); } dl.facts dd { margin:0; }
.badge { display:inline-block; padding:0 .5rem; border-radius:999px; font-size:.8rem; font-weight:600; border:1px solid currentColor; }
.s-succeeded, .o-ok { color:var(--ok); } .s-failed, .s-interrupted, .o-fail { color:var(--fail); } .s-awaiting_input, .s-blocked, .s-running { color:var(--wait); } .s-cancelled { color:var(--stop); }
.panel { background:var(--panel); border:1px solid var(--line); border-radius:8px; padding:.8rem 1rem; margin:.6rem 0; }
.panel.bad { border-color:var(--fail); } .panel.good { border-color:var(--ok); } .panel.wait { border-color:var(--wait); }
details.step { border:1px solid var(--line); border-radius:8px; margin:.5rem 0; background:var(--bg); }
details.step > summary { cursor:pointer; padding:.5rem .8rem; list-style:none; display:flex; gap:.8rem; align-items:baseline; flex-wrap:wrap; }
details.step > summary::-webkit-details-marker { display:none; }
details.step[open] > summary { border-bottom:1px solid var(--line); background:var(--panel); border-radius:8px 8px 0 0; }
details.step .body { padding:.6rem .9rem; }
.muted { color:var(--muted); } .small { font-size:.85rem; }
#live.stopped { color:var(--fail); font-weight:600; }
.msg { border-left:3px solid var(--line); padding:.2rem .7rem; margin:.5rem 0; } .msg.system { border-color:var(--stop); } .msg.user { border-color:var(--accent); } .msg.assistant { border-color:var(--ok); } .msg.tool { border-color:var(--wait); }
.tool-call { margin:.3rem 0; } details.raw > summary { cursor:pointer; margin:-.3rem 0 .4rem; }
.msg .role { font-weight:600; font-size:.8rem; text-transform:uppercase; color:var(--muted); }
form.decide label { display:block; margin:.5rem 0; } form.decide textarea { display:block; width:100%; max-width:52rem; font:inherit; margin-top:.2rem; } form.decide select { font:inherit; margin-left:.3rem; }
form.filters { display:flex; gap:.6rem; flex-wrap:wrap; align-items:end; margin:.4rem 0 1rem; } form.filters label { display:flex; flex-direction:column; font-size:.8rem; color:var(--muted); }
form.filters input, form.filters select { font:inherit; padding:.2rem .4rem; }
.graph-wrap { overflow:auto; border:1px solid var(--line); border-radius:8px; background:var(--panel); }
svg.graph .node { fill:var(--bg); stroke:var(--line); stroke-width:1.5; } svg.graph .node.ran { stroke:var(--accent); stroke-width:2.5; } svg.graph .node.waiting { stroke:var(--wait); stroke-width:3; stroke-dasharray:6 3; }
svg.graph .end { fill:var(--panel); } svg.graph .end-failed { stroke:var(--fail); } svg.graph .end-end { stroke:var(--ok); } svg.graph .end-blocked { stroke:var(--wait); }
svg.graph .node-text { fill:var(--fg); font:600 12px system-ui, sans-serif; } svg.graph .node-kind { fill:var(--muted); font:11px system-ui, sans-serif; }
svg.graph .edge { fill:none; stroke:var(--muted); stroke-width:1.2; opacity:.7; } svg.graph .edge.taken { stroke:var(--accent); stroke-width:3; opacity:1; } svg.graph .edge.undeclared { stroke-dasharray:4 3; }
svg.graph .edge-label { fill:var(--muted); font:11px system-ui, sans-serif; } svg.graph .edge-label.taken { fill:var(--accent); font-weight:700; }
svg.graph .arrowhead { fill:var(--muted); } svg.graph .arrowhead.taken { fill:var(--accent); }
svg.graph .node.running { stroke:var(--wait); stroke-width:3.5; fill:color-mix(in srgb, var(--wait) 12%, var(--bg)); }
svg.graph .node.child { stroke-width:2; } svg.graph .fan-child { color:var(--muted); } svg.graph .fan-child .node { stroke:currentColor; }
svg.graph .fan-child.s-succeeded { color:var(--ok); } svg.graph .fan-child.s-failed, svg.graph .fan-child.s-interrupted { color:var(--fail); }
svg.graph .fan-child.s-running, svg.graph .fan-child.s-awaiting_input, svg.graph .fan-child.s-blocked, svg.graph .fan-child.s-pending { color:var(--wait); }
svg.graph .fan-child.s-cancelled { color:var(--stop); } svg.graph .node.more { stroke-dasharray:4 3; } svg.graph .edge.fan { stroke-dasharray:2 3; opacity:.6; }
.graph-legend .swatch { display:inline-block; width:1.6em; height:.9em; border-radius:3px; margin-right:.35em; vertical-align:-1px; border:2px solid var(--line); background:var(--bg); }
.graph-legend .swatch.ran { border-color:var(--accent); } .graph-legend .swatch.running { border:3px solid var(--wait); background:color-mix(in srgb, var(--wait) 12%, var(--bg)); }
.graph-legend .swatch.waiting { border:3px dashed var(--wait); } .graph-legend .swatch.child-ok { border-color:var(--ok); border-radius:999px; }
.graph-legend .swatch.child-bad { border-color:var(--fail); border-radius:999px; } .graph-legend .swatch.child-wait { border-color:var(--wait); border-radius:999px; }
svg.graph .edge-label { paint-order:stroke; stroke:var(--panel); stroke-width:4px; stroke-linejoin:round; }
svg.chart .track { fill:var(--panel); fill-opacity:.5; stroke:var(--line); } svg.chart .bar { fill:var(--accent); } svg.chart .bar.bad { fill:var(--fail); } svg.chart text { fill:var(--fg); font:11px system-ui, sans-serif; } svg.chart .axis { stroke:var(--muted); }
svg.chart .tick { stroke:var(--line); stroke-dasharray:2 3; } svg.chart .tick-label, svg.chart .axis-label { fill:var(--muted); } svg.chart .axis-label { font-style:italic; } svg.chart .series { fill:none; stroke:var(--accent); stroke-width:1.5; }
table.runs td:first-child, table.runs code, table.runs td.status, table.runs td.when, table.runs td.duration, table.runs td.worker, table.runs td.queue { white-space:nowrap; }
svg.waterfall text { fill:var(--fg); font:11px system-ui, sans-serif; } svg.waterfall .tick { stroke:var(--line); } svg.waterfall .tick-label, svg.waterfall .span-time { fill:var(--muted); }
.bar.step { fill:var(--accent); } .bar.step-failed { fill:var(--fail); } .bar.child { fill:var(--ok); } .bar.tool { fill:var(--stop); }
.bar.queued { fill:var(--muted); opacity:.45; } .bar.waiting { fill:var(--wait); opacity:.55; } .legend .key { margin-right:1rem; white-space:nowrap; }
.d2h-file-wrapper { border:1px solid var(--line); border-radius:6px; margin:.5rem 0; overflow:hidden; }
.d2h-file-header { display:flex; justify-content:space-between; align-items:center; padding:.3rem .6rem; background:var(--panel); border-bottom:1px solid var(--line); font-family:var(--mono); font-size:12.5px; }
.d2h-file-name-wrapper { display:flex; gap:.4rem; align-items:center; } .d2h-icon { fill:var(--muted); } .d2h-file-collapse { display:none; }
.d2h-tag { font-size:10px; border:1px solid currentColor; border-radius:3px; padding:0 .3rem; } .d2h-changed-tag { color:var(--wait); } .d2h-added-tag { color:var(--ok); } .d2h-deleted-tag { color:var(--fail); } .d2h-moved-tag { color:var(--accent); }
.d2h-file-diff { overflow-x:auto; } table.d2h-diff-table { width:100%; border-collapse:collapse; font-family:var(--mono); font-size:12.5px; }
.d2h-diff-table td { border:0; padding:0 .4rem; vertical-align:top; } .d2h-code-linenumber { width:1%; white-space:nowrap; color:var(--muted); user-select:none; border-right:1px solid var(--line) !important; }
.d2h-code-linenumber div { display:inline-block; width:2.8em; text-align:right; } .d2h-code-line { white-space:nowrap; } .d2h-code-line-ctn { white-space:pre; } .d2h-code-line-prefix { display:inline-block; width:1.2em; color:var(--muted); }
.d2h-ins { background:rgba(46,160,67,.15); } .d2h-del { background:rgba(248,81,73,.15); } .d2h-info { background:rgba(56,139,253,.1); color:var(--muted); }
.d2h-code-line ins { background:rgba(46,160,67,.35); text-decoration:none; } .d2h-code-line del { background:rgba(248,81,73,.35); text-decoration:none; }
.diff-added { color:var(--ok); } .diff-removed { color:var(--fail); } .diff-changed { color:var(--wait); }
`

export interface PageOptions {
  title: string
  nonce: string
  body: Html
  /** A script of pipe's own, run under the nonce (the live list's polling, the run page's links). */
  script?: string
  /** The script asks the server for data (connect-src 'self'); otherwise the page connects nowhere. */
  live?: boolean
  /** The exported file: no links back to a server. */
  standalone?: boolean
}

export function page(options: PageOptions): string {
  const nav = options.standalone
    ? html`<header class="top">
        <span class="brand">pipe</span><span class="muted small">exported run page: a snapshot of the store when it was written</span>
      </header>`
    : html`<header class="top"><a class="brand" href="/">pipe</a><a href="/">runs</a><a href="/stats">stats</a></header>`
  const csp = contentSecurityPolicy(options.nonce, !options.standalone && options.live === true, true)
  return `<!doctype html>\n${
    html`<html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta http-equiv="Content-Security-Policy" content="${csp}" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <meta name="referrer" content="no-referrer" />
        <title>${options.title}</title>
        <style nonce="${options.nonce}">
          ${trusted(STYLE)}
        </style>
      </head>
      <body>
        ${nav}
        <main>${options.body}</main>
        ${
          options.script !== undefined
            ? html`<script nonce="${options.nonce}">
                ${trusted(options.script)}
              </script>`
            : ''
        }
      </body>
    </html>`.text
  }\n`
}
