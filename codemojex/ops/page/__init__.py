"""`codemojex ops`: the operator page (aiohttp + Jinja2, charts by the vendored uPlot).

`app.make_app` builds it; `auth` keeps who may use it; `views` reads what it shows; `history`
samples the charts' numbers into memory; templates/ and static/ are package data.
"""
