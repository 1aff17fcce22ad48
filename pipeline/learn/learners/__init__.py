"""The learners of gramtile, one module each, behind one protocol (:mod:`.base`), by name in
:mod:`.registry`."""
