"""The pytest glue: everything that talks to pytest lives here.

* :mod:`.hooks`: the plugin's hooks (the ``pytest11`` entry point ``sits``;
  disable it with ``-p no:sits``);
* :mod:`.fixtures`: every public ``sits_*`` fixture, usable from a lab's own tests;
* :mod:`.session`: the one object that resolves every option of a session;
* :mod:`.recorder`: verdicts recorded on the test item (they travel to the
  xdist controller inside the ``TestReport``);
* :mod:`.reporter`: the controller's reporter, which writes the report;
* :mod:`.hookspecs`: the hooks a conftest may implement.
"""
