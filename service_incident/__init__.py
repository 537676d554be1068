"""Service Incident: an on-call SRE environment; this package is its sans-I/O core.

The server and the client live in the repository's top-level `server/` and `client/` folders and are
installed as `service_incident.server` and `service_incident.client`. A script run from a checkout
(`python inference.py`) imports this folder rather than the installed package, so in a checkout the
package also looks for its subpackages beside it, as the installed one finds them inside it.
"""

from pathlib import Path

from . import compiled

compiled.install()

_here = Path(__file__).resolve().parent
if not (_here / "server").is_dir() and (_here.parent / "server" / "app.py").is_file():
    __path__.append(str(_here.parent))
del _here
