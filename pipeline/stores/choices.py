"""The stores' choices a command line offers, as plain names: K's dtypes and the export formats.

``gramtile gram --dtype`` and ``gramtile export --format`` read them here, without importing the
stores and Zarr; :mod:`~gramtile.pipeline.stores.gram_store` takes its constants from here.
"""

#: K's precision in a Gram store
DTYPES = ("float64", "float32")
#: the file formats of ``GramStore`` exports (:func:`~gramtile.pipeline.stores.gram_export.export_selection`)
EXPORT_FORMATS = ("npy", "libsvm", "svmlight")
