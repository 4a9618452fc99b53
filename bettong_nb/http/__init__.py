"""HTTP for the providers and the search sources: one ``AsyncClient`` per service with retries,
timeouts and errors that never carry a key (``client``), request bodies built from JSON encoded
once (``json_body``), and the plain-asyncio network backend (``_asyncio_transport``).
Imports only ``safety`` and ``errors``.

    from bettong_nb.http.client import Transport
"""
