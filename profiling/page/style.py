"""The page's look: one style sheet for the whole page, and the rules two components carry.

Element ids name the components (`#gantt`, `#an-kernels`, ...); the `ap-` classes are the HTML
that the views write (the summary strip, the GPU idle & launch block, summary rows).
"""

# Gradio's theme asks for Source Sans Pro, whose semibold file it ships is a subset of a few
# glyphs: bold text mixed two fonts (the bold "A" of the title). Each platform's own UI font has
# every glyph the page writes, in every weight.
FONT_STACK = (
    'system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", "Helvetica Neue", Arial, '
    '"Liberation Sans", sans-serif'
)
MONO_STACK = (
    'ui-monospace, "SF Mono", Menlo, Consolas, "DejaVu Sans Mono", "Liberation Mono", monospace'
)
CSS = (
    f":root, .dark {{ --font: {FONT_STACK}; --font-mono: {MONO_STACK}; }}"
    + """
.ap-banner { border-left: 4px solid #f59f00; background: rgba(245,159,0,0.10);
  padding: 6px 12px !important; border-radius: 6px; }
#diff-headline p { font-size: 16px; font-weight: 600; }
/* A dropdown's chosen label (an unavailable variant's is long) ends in an ellipsis before the
   arrow instead of running under it. */
.secondary-wrap input[role="combobox"] { padding-right: 28px !important;
  text-overflow: ellipsis; }
/* A table header breaks between its words, never inside one ("G/P/U/µ/s", "St/eps" at 1280
   px, issue 42): Gradio sizes a column no narrower than its header's longest word, and a table
   wider than the page scrolls sideways. Widths a view sets are held to the same
   (views.shared.fit_header_widths). A hyphen is a place to break, as in any text. */
.header-cell span.header { word-break: normal !important; overflow-wrap: normal !important; }
/* ...and no column Gradio sizes itself is squeezed under 100 px: a Diff's 14 columns of long
   labels scroll sideways instead of stacking each header eight lines deep. */
.header-cell { min-width: 100px; }
/* Phones: charts and tables keep a readable width and scroll sideways instead of squeezing
   (a 95 px plot area, numbers broken mid-digit). */
@media (max-width: 720px) {
  #gantt, #an-gantt, #cmp-gantts, #cmp-bars { overflow-x: auto !important; }
  #gantt .js-plotly-plot, #an-gantt .js-plotly-plot, #cmp-gantts .js-plotly-plot,
  #cmp-bars .js-plotly-plot { min-width: 720px; }
  #operators, #kernels, #glance, #sw-table, #an-operators, #an-kernels {
    overflow-x: auto !important; }
  #operators .table-container, #kernels .table-container, #glance .table-container,
  #sw-table .table-container, #an-operators .table-container,
  #an-kernels .table-container { min-width: 640px; }
}
"""
)
# The GPU idle & launch block and the summary rows (Profile strip, Analyse outputs).
ROWS_CSS = """
.ap-launch { margin-top: 10px; border: 1px solid var(--border-color-primary); border-radius: 8px;
  padding: 8px 10px; background: var(--block-background-fill); }
.ap-launch-title { font-size: 13px; font-weight: 600; margin-bottom: 4px; }
.ap-launch .ap-note { font-size: 13px; }
.ap-launch dl, dl.ap-rows { display: grid; grid-template-columns: max-content 1fr;
  gap: 2px 14px; margin: 0; font-size: 13px; }
.ap-launch dt, dl.ap-rows dt { color: var(--body-text-color-subdued); }
.ap-launch dd, dl.ap-rows dd { margin: 0; overflow-wrap: anywhere; }
.ap-launch-table { margin-top: 8px; font-size: 12px; border-collapse: collapse; }
.ap-launch-table th, .ap-launch-table td { padding: 2px 8px; text-align: right;
  border-bottom: 1px solid var(--border-color-primary); }
.ap-launch-table th:first-child, .ap-launch-table td:first-child { text-align: left; }
"""
# The strip's look travels with its component, so it holds however the demo is served.
STRIP_CSS = (
    """
.ap-strip { display: grid; grid-template-columns: repeat(auto-fit, minmax(128px, 1fr));
  gap: 8px; }
.ap-card { border: 1px solid var(--border-color-primary); border-radius: 8px;
  padding: 8px 10px; background: var(--block-background-fill); }
.ap-label { font-size: 12px; color: var(--body-text-color-subdued); }
.ap-value { font-size: 18px; font-weight: 600; line-height: 1.3; overflow-wrap: break-word; }
.ap-value.ap-long { font-size: 14px; line-height: 1.5; }
.ap-note { font-size: 11px; color: var(--body-text-color-subdued); line-height: 1.25; }
.ap-extra { font-size: 13px; margin-top: 8px; color: var(--body-text-color); }
.ap-empty { display: block; padding: 12px; color: var(--body-text-color-subdued);
  border: 1px dashed var(--border-color-primary); border-radius: 8px; }
"""
    + ROWS_CSS
)
