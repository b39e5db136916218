"""The walk of an HDF5 file's objects (hdf5.py plans what it finds)."""

from __future__ import annotations

from .reporting import unchecked
from ..tasks import problem


def walk(h5py, f, path, prefix, tasks):
    """Yield (node, object, address in the file, number of attributes) for the root group (node
    None) and every object reachable from it by hard links, once each, depth first in name order
    (as HDF5's own visit); `name_of(node)` is its path. Objects are h5py's low-level ids
    (h5g.GroupID, h5d.DatasetID, h5t.TypeID of a named type), never wrapped in h5py's high-level
    classes (which read what the plan does not need). Each object is opened from its parent
    group; a group is held open only while its own links are walked, and reopened through an
    object reference when the walk comes back to it: time and memory linear in the objects,
    whatever the nesting (HDF5 keeps thousands of open nested groups slowly). External links
    become unchecked tasks; soft links name objects reached by their hard links, and are
    skipped."""
    h5l, h5o, h5r, h5g = h5py.h5l, h5py.h5o, h5py.h5r, h5py.h5g
    fid = f.id
    info = h5o.get_info(fid)
    root = info.addr
    seen = {root}
    yield None, h5g.open(fid, b"/"), root, info.num_attrs
    stack = [[None, fid, _links(fid)]]  # node, reference to reopen it (the root: its id), links
    gid = fid
    while stack:
        entry = stack[-1]
        node, ref, links = entry
        if gid is None:
            gid = ref if ref is fid else h5r.dereference(ref, fid)
        raw, kind, address = next(links, (None, None, None))
        if raw is None:
            stack.pop()
            gid = None
            continue
        child = (node, raw)
        if kind == h5l.TYPE_EXTERNAL:
            link = h5py.Group(gid).get(raw, getlink=True)
            tasks.append(unchecked(path, prefix + name_of(child), "external link", (),
                                   f"external link to {link.filename}:{link.path}: data in "
                                   "another file, not followed"))
            continue
        if kind != h5l.TYPE_HARD or address in seen:
            continue
        seen.add(address)
        oid = h5o.open(gid, raw)
        try:
            info = h5o.get_info(oid)  # reads its whole header (a chunk index too), as HDF5's
            group = isinstance(oid, h5g.GroupID)  # visit does
            links_of_child = _links(oid) if group else None
        except Exception as e:
            tasks.append(problem(path, f"{prefix}{name_of(child)}: the object cannot be read: "
                                 f"{e}"))
            continue
        yield child, oid, address, info.num_attrs
        if group:
            if ref is None:
                entry[1] = h5r.create(gid, b".", h5r.OBJECT)
            stack.append([child, None, links_of_child])
            gid = oid


def _links(gid):
    """An iterator over (name, link type, address) of the links of group `gid`, in name order,
    read in one pass (no lookup by name)."""
    found = []
    gid.links.iterate(lambda name, info: found.append((name, info.type, info.u)), info=True)
    return iter(found)


def attribute_names(h5py, oid, count=None) -> tuple:
    """(the names of the attributes of object `oid` (a low-level id) in h5py's order and as
    h5py gives them, the object's creation property list or None): `list(obj.attrs)` without
    its high-level machinery (18 us an object), the list shared with the dataset's planning.
    `count`: the number of attributes where already known (the walk's)."""
    if not (h5py.h5a.get_num_attrs(oid) if count is None else count):
        return [], None
    cpl = oid.get_create_plist()
    tracked = cpl.get_attr_creation_order() & h5py.h5p.CRT_ORDER_TRACKED
    raw: list = []
    h5py.h5a.iterate(oid, raw.append,
                     index_type=h5py.h5.INDEX_CRT_ORDER if tracked else h5py.h5.INDEX_NAME)
    try:  # names hold no NUL (HDF5 keeps them as C strings): decoded at once
        return b"\0".join(raw).decode("utf-8").split("\0") if raw else [], cpl
    except UnicodeDecodeError:
        return [_decoded(name) for name in raw], cpl


def _decoded(name: bytes):
    # as h5py's AttributeManager names them: UTF-8 text, else the bytes
    try:
        return name.decode("utf-8")
    except UnicodeDecodeError:
        return name


def name_of(node) -> str:
    """The path of a walk's node ("" for the root)."""
    parts = []
    while node is not None:
        node, raw = node
        parts.append(raw)
    return b"/".join(reversed(parts)).decode("utf-8", "surrogateescape")


__all__ = ["attribute_names", "name_of", "walk"]
