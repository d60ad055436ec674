-- An event can be stopped as a whole (StopTournament): the stop is kept so that a
-- Swiss event or knockout between rounds (every test finished, the next round not
-- yet made) makes no more tests, after a restart too. 0: not stopped by hand (an
-- event whose test was stopped is stopped too, which its tests' states say).
ALTER TABLE tournaments ADD COLUMN stopped_ms BIGINT NOT NULL DEFAULT 0;
