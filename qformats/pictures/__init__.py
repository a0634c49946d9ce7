"""Pictures drawn from qformats' JSON reports (DESIGN.md §7; spec/checkpoints.md INSPECT-1, INSPECT-2).

``data``: what a picture needs, gathered into the report (``inspect --json``'s ``pictures``); ``svg``: heatmaps,
histograms and bar charts from plain data; ``style``: the frame every page shares; ``page``: the inspect page.
Nothing here reads a tensor except ``data.collect``; the pages are functions of the documents.
"""
