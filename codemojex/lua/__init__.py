"""The Lua scripts' one loader (`loader.py`) and the helpers every package's scripts share
(`includes/`: the server's clock). The lanes, posting and the state each keep their scripts in
their own `lua/` and their key names in their own `keys.py`; this package knows neither."""
