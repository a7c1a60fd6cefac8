//! Redis's `cmsgpack` library: not provided yet; its functions raise an error saying so.

use mlua::{Lua, Table};

/// The `cmsgpack` functions: `pack` and `unpack`, which refuse.
pub(super) fn table(lua: &Lua) -> mlua::Result<Table> {
    let cmsgpack = lua.create_table()?;
    for name in ["pack", "unpack"] {
        cmsgpack.raw_set(
            name,
            lua.create_function(move |_, _: mlua::MultiValue| -> mlua::Result<()> {
                Err(mlua::Error::runtime(format!(
                    "cmsgpack.{name} is not available in Osprey yet"
                )))
            })?,
        )?;
    }
    Ok(cmsgpack)
}
