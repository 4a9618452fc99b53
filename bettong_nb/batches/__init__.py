"""Many runs at once: ``local`` (map, amap and map_frame on this process's event loop, with one
budget and progress) and ``distributed`` (map_frame over a Dask frame on its cluster)."""
