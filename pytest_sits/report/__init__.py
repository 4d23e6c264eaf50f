"""The report: its model (:mod:`.model`), the one reader and writer of report files (:mod:`.store`), the HTML,
Markdown and terminal renderings (:mod:`.render`, :mod:`.charts`, ``templates/``), the analytics
(:mod:`.analytics`) and replay (:mod:`.replay`).  Nothing here imports pytest: the ``sits`` commands read,
replay and render reports without it.
"""
